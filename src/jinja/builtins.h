// Jinja's filters, tests, attribute and item access, and the Python methods templates call on
// strings and dicts (internal to the jinja module).
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace reprise::jinja {

// `limit` bounds the size of strings a filter builds.
Value ApplyFilter(const std::string& name, const Value& input, CallArgs& args, size_t limit);
bool ApplyTest(const std::string& name, const Value& input, CallArgs& args);
// Whether a filter or test of that name exists (the parser refuses unknown ones, as jinja2 does).
bool IsKnownFilter(std::string_view name);
bool IsKnownTest(std::string_view name);

// obj.name: a dict's key or method (items, keys, values, get), a string's method, else undefined.
// Throws Error on an undefined object.
Value GetAttribute(const Value& object, const std::string& name);
// obj[key]; a missing key or index gives undefined. Throws Error on an undefined object.
Value GetItem(const Value& object, const Value& key);
// obj[start:stop:step] on lists and strings (null parts: absent).
Value GetSlice(const Value& object, const Value* start, const Value* stop, const Value* step);

// The items a for loop visits: a list's items, a dict's keys, a string's characters.
Array Iterate(const Value& value);
// Python's len().
size_t Length(const Value& value);
// `item in container`.
bool Contains(const Value& container, const Value& item);

// Python's string operations (ASCII case mapping).
inline constexpr std::string_view kPythonWhitespace = " \t\n\r\v\f\x1c\x1d\x1e\x1f";
std::string StripChars(const std::string& text, std::string_view chars, bool left, bool right);
// str.replace(old, replacement, count); count < 0: all.
std::string Replace(const std::string& text, const std::string& old, const std::string& replacement,
                    int64_t count);

}  // namespace reprise::jinja
