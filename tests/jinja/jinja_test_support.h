// The python3-jinja2 oracle for the jinja tests: finds a python3 that can import jinja2 and runs
// render_reference.py on a batch of (template, context) cases.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "test_support.h"

namespace reprise::testing {

// /usr/bin/python3 first (Debian's python3-jinja2), else python3 on PATH; "" when neither can
// import jinja2.
inline std::string PythonWithJinja2() {
  for (const char* candidate : {"/usr/bin/python3", "python3"}) {
    std::string command = std::string(candidate) + " -c 'import jinja2' >/dev/null 2>&1";
    if (std::system(command.c_str()) == 0) return candidate;
  }
  return "";
}

// 26 July 2024, 10:30 local time: strftime_now's date on both sides (the request's "now").
inline std::time_t FixedDate() {
  std::tm date{};
  date.tm_year = 2024 - 1900;
  date.tm_mon = 6;
  date.tm_mday = 26;
  date.tm_hour = 10;
  date.tm_min = 30;
  date.tm_isdst = -1;
  return std::mktime(&date);
}

// Renders `request` ({"now": ..., "cases": [...]}) with render_reference.py; one result per case.
inline nlohmann::json RunReference(const std::string& python, const nlohmann::json& request) {
  const auto input = ScratchDir() / "jinja_reference_in.json";
  const auto output = ScratchDir() / "jinja_reference_out.json";
  std::ofstream(input) << request.dump();
  std::string command = "timeout 300 " + python +
                        " " REPRISE_SOURCE_DIR "/tests/jinja/render_reference.py " +
                        input.string() + " " + output.string();
  EXPECT_EQ(std::system(command.c_str()), 0) << command;
  std::ifstream file(output);
  std::stringstream text;
  text << file.rdbuf();
  return nlohmann::json::parse(text.str());
}

}  // namespace reprise::testing
