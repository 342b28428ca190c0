#include "pcdino/cluster/script_grants.hpp"

#include <cctype>
#include <regex>

#include "pcdino/cluster/containers.hpp"
#include "pcdino/core/error.hpp"

namespace pcdino::cluster {

namespace {

// "%2F" -> "/": S3 keys in https URLs are percent-encoded.
std::string percent_decoded(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += static_cast<char>(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::vector<std::string> labels(const std::string& host) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const auto dot = host.find('.', start);
    out.push_back(host.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return out;
    start = dot + 1;
  }
}

// The label naming S3's endpoint: "s3", "s3-REGION", "s3-external-1", "s3-accelerate", "s3-website[-REGION]"
// (not an access point's, S3 Object Lambda's or S3 Control's).
bool s3_label(const std::string& label) {
  static const std::regex endpoint(
      R"(s3(-(external-1|accelerate|website(-[a-z]{2}(-gov)?-[a-z]+-[0-9]+)?|[a-z]{2}(-gov)?-[a-z]+-[0-9]+))?)");
  return std::regex_match(label, endpoint);
}

// What may follow the endpoint's label: a region, "dualstack", "website" (s3-website.REGION).
bool after_s3_label(const std::string& label) {
  static const std::regex region(R"([a-z]{2}(-gov)?-[a-z]+-[0-9]+|dualstack)");
  return std::regex_match(label, region);
}

}  // namespace

std::optional<S3Object> s3_object(const std::string& url) {
  const auto split_path = [](const std::string& path) -> std::optional<S3Object> {
    const auto slash = path.find('/');
    if (slash == std::string::npos || slash == 0 || slash + 1 == path.size()) return std::nullopt;
    return S3Object{path.substr(0, slash), path.substr(slash + 1)};
  };
  if (url.rfind("s3://", 0) == 0) return split_path(url.substr(5));
  if (url.rfind("https://", 0) != 0) return std::nullopt;
  std::string rest = url.substr(8);
  rest = rest.substr(0, rest.find_first_of("?#"));
  const auto slash = rest.find('/');
  if (slash == std::string::npos) return std::nullopt;
  std::string host = rest.substr(0, slash);
  for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (host.size() > 4 && host.compare(host.size() - 4, 4, ":443") == 0) host.resize(host.size() - 4);
  const std::string path = percent_decoded(rest.substr(slash + 1));
  for (const std::string suffix : {".amazonaws.com", ".amazonaws.com.cn"}) {
    if (host.size() <= suffix.size() || host.compare(host.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::vector<std::string> parts = labels(host.substr(0, host.size() - suffix.size()));
    // The last label that names S3 with only regions and "dualstack" after it; what precedes it is the
    // bucket.
    for (std::size_t i = parts.size(); i-- > 0;) {
      if (!s3_label(parts[i])) {
        if (after_s3_label(parts[i])) continue;
        return std::nullopt;
      }
      if (i == 0) return split_path(path);  // path style: the bucket is the path's first segment
      std::string bucket;
      for (std::size_t j = 0; j < i; ++j) bucket += (j == 0 ? "" : ".") + parts[j];
      if (path.empty()) return std::nullopt;
      return S3Object{bucket, path};
    }
  }
  return std::nullopt;
}

bool iam_pattern_matches(const std::string& pattern, const std::string& text) {
  // Greedy match with one backtrack point, the last '*' seen.
  std::size_t p = 0, t = 0, star = std::string::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool grant_covers(const S3AccessSpec& grant, const S3Object& object) {
  return grant.bucket == object.bucket && (grant.key.empty() || iam_pattern_matches(grant.key, object.key));
}

std::vector<RootScript> root_scripts(const SiteSpec& site) {
  std::vector<RootScript> scripts;
  // A prefix exists exactly when a section of head-node.sh is on (site.hpp, head_node_s3_prefix()).
  if (const std::string prefix = head_node_s3_prefix(site); !prefix.empty()) {
    scripts.push_back({"head-node.sh, the head node's OnNodeConfigured and OnNodeUpdated action",
                       prefix + "/head-node.sh"});
    if (site.containers.enabled)
      scripts.push_back(
          {"compute-node.sh, the compute nodes' OnNodeConfigured action", compute_node_script_url(site)});
  }
  if (!site.on_node_configured.empty())
    scripts.push_back({"custom_actions.on_node_configured, the compute nodes' OnNodeConfigured script",
                       site.on_node_configured});
  return scripts;
}

std::string write_grant_problem(const S3AccessSpec& grant, const SiteSpec& site) {
  if (!grant.write) return "";
  for (const RootScript& script : root_scripts(site)) {
    const std::optional<S3Object> object = s3_object(script.url);
    if (!object || !grant_covers(grant, *object)) continue;
    const std::string granted = grant.key.empty() ? "the whole bucket " + grant.bucket
                                                  : "key '" + grant.key + "' in bucket " + grant.bucket;
    return "write access to " + granted + " covers key '" + object->key + "' (" + script.url + "), " +
           script.what +
           ", which ParallelCluster runs as root; the compute nodes give every job the instance role, so any "
           "job could replace it: grant write on another bucket or key prefix, or keep the script elsewhere";
  }
  return "";
}

void check_script_grants(const SiteSpec& site) {
  for (std::size_t i = 0; i < site.s3_access.size(); ++i)
    if (const std::string why = write_grant_problem(site.s3_access[i], site); !why.empty())
      throw ConfigError(site.source + ": iam.s3_access[" + std::to_string(i) + "]: " + why);
}

}  // namespace pcdino::cluster
