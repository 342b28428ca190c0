// What the accelerator kinds' files (src/<kind>.cpp) share: reading a vendor's tool and its node's facts.
#pragma once

#include <regex>
#include <string>
#include <vector>

#include "pcdino/ami/accelerators.hpp"
#include "pcdino/doctor/accelerators.hpp"

namespace pcdino::doctor {

/// `s` without leading and trailing whitespace.
std::string trim(const std::string& s);

/// `items` joined with `separator`: the lists of the checks' details.
std::string join(const std::vector<std::string>& items, const char* separator = ", ");

/// The entries of `dir` whose file name matches `name` (0 when `dir` cannot be read).
int count_matching(const std::string& dir, const std::regex& name);

/// Whether `program` (a path, or a name searched in PATH) is an executable file.
bool executable(const std::string& program);

/// The node's facts: its `device_files`, whether `module` is loaded, and `argv` run under `seconds` (not
/// started when it is not an executable file: a starved node must still answer the doctor in time).
VendorNode probe_tool(const std::vector<std::string>& argv, int device_files, const char* module,
                      double seconds);

/// The accelerator instance `instance_type` is when its accelerator is `accelerator` (ami's name of the
/// kind), else nullptr.
const ami::AcceleratorInstance* expected_of(const std::string& instance_type, const char* accelerator);

/// Sets `*absent` when the node shows nothing of the stack and its type (`expected`) carries none; returns
/// the failure naming what is missing (the `module` not loaded, the `tool` not found or failing; `what`:
/// the devices as the type counts them), or "" when the stack is there and the tool's output can be judged.
std::string presence(const VendorNode& node, const ami::AcceleratorInstance* expected, const char* what,
                     const char* module, const char* tool, bool* absent);

/// The string component `name` of the image manifest at `manifest` ("" when the manifest is "", absent or
/// malformed, or has no such string: the image check reports a malformed manifest).
std::string manifest_component(const std::string& manifest, const std::string& name);

}  // namespace pcdino::doctor
