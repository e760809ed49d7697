#include "formats/gguf/gguf_value.hpp"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "base/strings.hpp"

namespace cortiq::gguf {

namespace {

template <class T>
constexpr bool kIsInteger = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// Largest magnitude below which every integer is exact in a double.
constexpr uint64_t kExactDoubleLimit = uint64_t{1} << 53;

void append_escaped(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          out.append(strfmt("\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c))));
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// The shortest %g form that reads back as the same value: 1e-05 for the
// f32 nearest 1e-5, not 9.99999975e-06.
template <class T>
std::string shortest_round_trip(T v) {
  constexpr int kMaxDigits = std::numeric_limits<T>::max_digits10;
  std::string text;
  for (int digits = std::numeric_limits<T>::digits10; digits <= kMaxDigits; ++digits) {
    text = strfmt("%.*g", digits, static_cast<double>(v));
    const T back = std::is_same_v<T, float> ? std::strtof(text.c_str(), nullptr)
                                            : static_cast<T>(std::strtod(text.c_str(), nullptr));
    if (back == v || std::isnan(v)) break;
  }
  return text;
}

template <class T>
void append_scalar(std::string& out, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    out.append(v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, std::string>) {
    append_escaped(out, v);
  } else if constexpr (std::is_floating_point_v<T>) {
    out.append(shortest_round_trip(v));
  } else if constexpr (std::is_signed_v<T>) {
    out.append(std::to_string(static_cast<int64_t>(v)));
  } else {
    out.append(std::to_string(static_cast<uint64_t>(v)));
  }
}

void append_array(std::string& out, const Array& array, size_t max_items);

template <class T>
void append_items(std::string& out, const std::vector<T>& items, size_t max_items) {
  out.push_back('[');
  const size_t shown = std::min(items.size(), max_items);
  for (size_t i = 0; i < shown; ++i) {
    if (i != 0) out.append(", ");
    if constexpr (std::is_same_v<T, Array>) {
      append_array(out, items[i], max_items);
    } else {
      append_scalar(out, static_cast<const T&>(items[i]));
    }
  }
  if (shown < items.size()) {
    out.append(shown == 0 ? "... (" : ", ... (");
    out.append(with_commas(items.size())).append(" items)");
  }
  out.push_back(']');
}

void append_array(std::string& out, const Array& array, size_t max_items) {
  std::visit([&](const auto& items) { append_items(out, items, max_items); }, array.items);
}

}  // namespace

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::u8:
      return "u8";
    case ValueType::i8:
      return "i8";
    case ValueType::u16:
      return "u16";
    case ValueType::i16:
      return "i16";
    case ValueType::u32:
      return "u32";
    case ValueType::i32:
      return "i32";
    case ValueType::f32:
      return "f32";
    case ValueType::boolean:
      return "bool";
    case ValueType::string:
      return "string";
    case ValueType::array:
      return "array";
    case ValueType::u64:
      return "u64";
    case ValueType::i64:
      return "i64";
    case ValueType::f64:
      return "f64";
  }
  return "?";
}

bool is_valid_value_type(uint32_t id) {
  return id <= static_cast<uint32_t>(ValueType::f64);
}

size_t Array::size() const {
  return std::visit([](const auto& items) { return items.size(); }, items);
}

Array Array::of(ValueType element_type) {
  Array array;
  array.element_type = element_type;
  // The variant alternatives are in ValueType order, so the index selects
  // the vector type; emplace it by index.
  switch (element_type) {
    case ValueType::u8:
      array.items.emplace<0>();
      break;
    case ValueType::i8:
      array.items.emplace<1>();
      break;
    case ValueType::u16:
      array.items.emplace<2>();
      break;
    case ValueType::i16:
      array.items.emplace<3>();
      break;
    case ValueType::u32:
      array.items.emplace<4>();
      break;
    case ValueType::i32:
      array.items.emplace<5>();
      break;
    case ValueType::f32:
      array.items.emplace<6>();
      break;
    case ValueType::boolean:
      array.items.emplace<7>();
      break;
    case ValueType::string:
      array.items.emplace<8>();
      break;
    case ValueType::array:
      array.items.emplace<9>();
      break;
    case ValueType::u64:
      array.items.emplace<10>();
      break;
    case ValueType::i64:
      array.items.emplace<11>();
      break;
    case ValueType::f64:
      array.items.emplace<12>();
      break;
  }
  return array;
}

std::optional<uint64_t> Value::as_uint() const {
  return std::visit(
      [](const auto& v) -> std::optional<uint64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (kIsInteger<T>) {
          if (v < 0) return std::nullopt;
          return static_cast<uint64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<int64_t> Value::as_int() const {
  return std::visit(
      [](const auto& v) -> std::optional<int64_t> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, uint64_t>) {
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
          return static_cast<int64_t>(v);
        } else if constexpr (kIsInteger<T>) {
          return static_cast<int64_t>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<double> Value::as_double() const {
  return std::visit(
      [](const auto& v) -> std::optional<double> {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_floating_point_v<T>) {
          return static_cast<double>(v);
        } else if constexpr (kIsInteger<T>) {
          // Integers convert only while the double holds them exactly.
          if constexpr (std::is_signed_v<T>) {
            const int64_t i = v;
            if (i < -static_cast<int64_t>(kExactDoubleLimit) ||
                i > static_cast<int64_t>(kExactDoubleLimit)) {
              return std::nullopt;
            }
          } else {
            if (static_cast<uint64_t>(v) > kExactDoubleLimit) return std::nullopt;
          }
          return static_cast<double>(v);
        } else {
          return std::nullopt;
        }
      },
      storage_);
}

std::optional<bool> Value::as_bool() const {
  if (const bool* b = std::get_if<bool>(&storage_)) return *b;
  return std::nullopt;
}

std::string Value::to_display_string(size_t max_items) const {
  std::string out;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Array>) {
          append_array(out, v, max_items);
        } else {
          append_scalar(out, v);
        }
      },
      storage_);
  return out;
}

}  // namespace cortiq::gguf
