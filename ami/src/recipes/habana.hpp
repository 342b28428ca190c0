// The Habana (Intel Gaudi) kind's recipes (recipe.hpp).
#pragma once

#include <vector>

#include "recipes/recipe.hpp"

namespace pcdino::ami {

/// The rows, in the Habana kind's row (habana.cpp).
const std::vector<Recipe>& habana_recipes();

}  // namespace pcdino::ami
