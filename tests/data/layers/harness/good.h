// A fixture for the layers test: harness may include core.
#pragma once
#include "core/error.h"
