// The Neuron (AWS Trainium and Inferentia) kind's recipes (recipe.hpp).
#pragma once

#include <vector>

#include "recipes/recipe.hpp"

namespace pcdino::ami {

/// The rows, in the Neuron kind's row (neuron.cpp).
const std::vector<Recipe>& neuron_recipes();

}  // namespace pcdino::ami
