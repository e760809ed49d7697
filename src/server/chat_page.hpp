// The chat page `cortiq serve` answers GET / with: one HTML file
// (src/server/web/chat.html, its script and style inline) built into the
// binary by cmake/embed_file.cmake, so nothing is fetched at run time.
#pragma once

#include <string_view>

namespace cortiq::server {

std::string_view chat_page();

}  // namespace cortiq::server
