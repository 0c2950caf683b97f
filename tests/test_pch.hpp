// Headers nearly every test translation unit parses (GoogleTest, nlohmann::json, fmt, the standard
// library's containers and streams), compiled once into a precompiled header that every test target
// reuses (tests/CMakeLists.txt): parsing them was a third of a test unit's compile time.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
