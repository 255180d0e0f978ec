// The torch and standard headers most files of _C include, precompiled once
// per build (csrc/aten/CMakeLists.txt, target_precompile_headers) instead of
// parsed by each of the ~110 translation units. Included first into every
// file of _C; never include it by hand. A header here must be one that many
// files use: each entry is parsed into every file.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/native/ReduceOpsUtils.h>
#include <ATen/native/TypeProperties.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>
