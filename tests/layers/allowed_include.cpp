// The control of layers/refused-include: the same compile with the front end's include
// directory accepts the shared value types it may use.
#include "core/model.hpp"
#include "core/recipe.hpp"
