// Compiled by CTest layers/refused-include with the front end's include directory only
// (build/rooms/frontend): the planner's private pass contracts are not the front end's
// to include, so this must fail with "planner/passes.hpp: No such file or directory".
#include "planner/passes.hpp"
