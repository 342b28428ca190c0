#include "pcdino/core/text_template.hpp"

namespace pcdino {

std::string fill_template(const std::string& text, const std::map<std::string, std::string>& vars) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    const auto open = text.find('@', pos);
    if (open == std::string::npos) break;
    const auto close = text.find('@', open + 1);
    if (close == std::string::npos) break;
    const std::string key = text.substr(open + 1, close - open - 1);
    const auto it = vars.find(key);
    if (it == vars.end() || key.empty() || key.find_first_of(" \n") != std::string::npos) {
      out += text.substr(pos, open + 1 - pos);
      pos = open + 1;
      continue;
    }
    out += text.substr(pos, open - pos) + it->second;
    pos = close + 1;
  }
  return out + text.substr(pos);
}

}  // namespace pcdino
