// A fixture for the layers test: core may not include a higher layer.
#pragma once
#include "harness/case.h"
