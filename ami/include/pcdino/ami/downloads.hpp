// What an image's scripts fetch from the network and run as root, each pinned (issue #70): a file by its
// sha256, a git source by the commit of its release tag, a vendor's package repository by its signing key's
// fingerprint. Each row names where the digest or fingerprint was published or recorded. A component whose
// version has no row is refused by check_compatibility() before anything is generated, unless the base AMI
// already ships it (then nothing is fetched).
#pragma once

#include <string>
#include <vector>

#include "pcdino/ami/compat.hpp"
#include "pcdino/ami/spec.hpp"

namespace pcdino::ami {

/// One file or git source an image's script fetches.
struct PinnedDownload {
  const char* component;  ///< key in versions: "cuda", "nccl", ...
  const char* version;    ///< as the image pins it: "12.4.1", "2.21.5-1"
  const char* variant;    ///< "" or what else picks the file: "cuda12" (cuDNN's build for CUDA 12)
  const char* url;        ///< the https:// file, or the git repository
  const char* tag;        ///< the git tag cloned; "" for a file
  const char* digest;     ///< the file's sha256 (64 hex), or the tag's commit (40 hex)
  const char* source;     ///< where the digest was published or read, and when
};

/// Every pinned download, by component.
const std::vector<PinnedDownload>& pinned_downloads();

/// The row of `component` at `version` (and `variant`), or nullptr.
const PinnedDownload* pinned_download(const std::string& component, const std::string& version,
                                      const std::string& variant = "");

/// A vendor's package-signing key: what a repository's packages are checked against once its fingerprint
/// has been checked.
struct SigningKey {
  const char* name;         ///< "nvidia-cuda-deb"
  const char* url;          ///< where the public key is fetched ("@FM_REPO@": the OS's CUDA repository)
  const char* fingerprint;  ///< 40 hex; "" = none published: what needs the key is refused
  const char* source;       ///< where the fingerprint was published or read
};

/// The key named `name`; throws std::out_of_range for a name the table lacks.
const SigningKey& signing_key(const std::string& name);

/// Every key (for tests and messages).
const std::vector<SigningKey>& signing_keys();

/// Every component of `spec` that would be fetched without a pin (appended to `found`): a version with no
/// row (a file's sha256, a tag's commit) that the base AMI does not ship, or a repository whose signing key
/// has no recorded fingerprint. Part of check_compatibility().
void check_downloads(const ImageSpec& spec, std::vector<Incompatibility>* found);

/// The signing key `component`'s packages come from on `os` ("" = none: a file or git source).
std::string package_key(const std::string& component, const std::string& os);

}  // namespace pcdino::ami
