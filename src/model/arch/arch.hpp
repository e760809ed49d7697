// The families defined in src/model/arch/*.cpp, declared from their table
// (model/families.def): each family file includes this, so that its Family
// has external linkage for families.cpp's table.
#pragma once

#include "model/family.hpp"

namespace cortiq {

#define CORTIQ_FAMILY(name) extern const Family name;
#include "model/families.def"
#undef CORTIQ_FAMILY

}  // namespace cortiq
