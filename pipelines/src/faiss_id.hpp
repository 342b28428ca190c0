// faiss's vector id type under one name: faiss::Index::idx_t up to faiss 1.7 (Debian 12), faiss::idx_t from
// 1.8 on (Debian 13's 1.11 has no Index::idx_t). Index::ntotal has that type in every release.
#pragma once

#include <faiss/Index.h>

namespace pcdino::pipelines {

using FaissId = decltype(faiss::Index::ntotal);

}  // namespace pcdino::pipelines
