// The NVIDIA kind's recipes: driver, Fabric Manager, CUDA, cuDNN, NCCL, aws-ofi-nccl, nccl-tests and
// dcgm-exporter (recipe.hpp).
#pragma once

#include <string>
#include <vector>

#include "recipes/recipe.hpp"

namespace pcdino::ami {

/// The rows, in the NVIDIA kind's row (nvidia.cpp).
const std::vector<Recipe>& nvidia_recipes();

std::string nvidia_driver_recipe(const RecipeContext& c);
std::string fabric_manager_recipe(const RecipeContext& c);
std::string dcgm_exporter_recipe(const RecipeContext& c);
std::string cuda_recipe(const RecipeContext& c);
std::string cudnn_recipe(const RecipeContext& c);
std::string nccl_recipe(const RecipeContext& c);
std::string aws_ofi_nccl_recipe(const RecipeContext& c);
std::string nccl_tests_recipe(const RecipeContext& c);

}  // namespace pcdino::ami
