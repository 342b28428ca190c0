// Generated text from a template: the scripts and configurations pcdino writes (Packer templates,
// provisioning scripts, the head node's custom action) are literal text with @KEY@ placeholders.
#pragma once

#include <map>
#include <string>

namespace pcdino {

/// Replaces every @KEY@ of `text` whose KEY is in `vars` with its value; any other '@' (an unknown key,
/// an empty one, or one spanning a space or newline, as in an e-mail address or a shell array) stays as it
/// is. Values are inserted once, never re-scanned. Throws nothing but std::bad_alloc.
std::string fill_template(const std::string& text, const std::map<std::string, std::string>& vars);

}  // namespace pcdino
