#!/usr/bin/env python3
"""Every standard header a file uses is included by that file (or by the
header of the same name it implements), so the build does not depend on one
standard library's transitive includes: GCC 13's libstdc++ dropped <cstdint>
from <string>, and a file that used uint32_t through it stopped compiling.

    scripts/check_includes.py          # lists what is missing, exits 1 if anything is
    scripts/check_includes.py --fix    # adds the missing #include lines

The table covers the standard names this code base uses; a name not in it
is not checked. Comments and string literals are not read as code.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ["core", "plugin_api", "plugins", "host", "tests", "bench", "examples"]
SUFFIXES = {".cpp", ".hpp", ".h", ".cc"}

# (pattern, header, other headers that also satisfy it)
TABLE = [
    (r"\b(?:std::)?u?int(?:8|16|32|64)_t\b|\bu?intptr_t\b|\bU?INT(?:8|16|32|64)_(?:MAX|MIN)\b|\bSIZE_MAX\b", "cstdint", {"stdint.h", "inttypes.h", "cinttypes"}),
    (r"\bstd::(?:string|to_string|stoi|stol|stoll|stoul|stoull|stod|stof|getline)\b(?!_view)", "string", set()),
    (r"\bstd::string_view\b", "string_view", set()),
    (r"\bstd::vector\b", "vector", set()),
    (r"\bstd::(?:map|multimap)\b", "map", set()),
    (r"\bstd::unordered_map\b", "unordered_map", set()),
    (r"\bstd::(?:set|multiset)\b", "set", set()),
    (r"\bstd::unordered_set\b", "unordered_set", set()),
    (r"\bstd::(?:optional|nullopt|make_optional)\b", "optional", set()),
    (r"\bstd::function\b", "functional", set()),
    (r"\bstd::(?:unique_ptr|shared_ptr|weak_ptr|make_shared|make_unique|enable_shared_from_this)\b", "memory", set()),
    (r"\bstd::(?:mutex|lock_guard|unique_lock|scoped_lock|recursive_mutex)\b", "mutex", set()),
    (r"\bstd::condition_variable\b", "condition_variable", set()),
    (r"\bstd::(?:thread|this_thread)\b", "thread", set()),
    (r"\bstd::atomic\b", "atomic", set()),
    (r"\bstd::chrono\b", "chrono", set()),
    (r"\bstd::deque\b", "deque", set()),
    (r"\bstd::array\b", "array", set()),
    (r"\bstd::list\b", "list", set()),
    (r"\bstd::(?:queue|priority_queue)\b", "queue", set()),
    (r"\bstd::(?:sort|stable_sort|find|find_if|count|count_if|remove|remove_if|transform|any_of|all_of|none_of|reverse|fill|copy|copy_if|"
     r"min|max|min_element|max_element|minmax|clamp|unique|lower_bound|upper_bound|equal|mismatch|search|replace|nth_element|partial_sort)\b", "algorithm", set()),
    (r"\bstd::(?:ostringstream|istringstream|stringstream)\b", "sstream", set()),
    (r"\bstd::(?:ifstream|ofstream|fstream)\b", "fstream", set()),
    (r"\bstd::(?:cout|cerr|cin|clog)\b", "iostream", set()),
    (r"\bstd::(?:runtime_error|invalid_argument|out_of_range|logic_error|length_error|range_error|overflow_error)\b", "stdexcept", set()),
    (r"\bstd::(?:exception|exception_ptr|current_exception|rethrow_exception|terminate)\b", "exception", {"stdexcept"}),
    (r"\bstd::filesystem\b", "filesystem", set()),
    (r"\bstd::numeric_limits\b", "limits", set()),
    (r"\bstd::(?:tuple|tie|make_tuple)\b", "tuple", set()),
    (r"\bstd::variant\b", "variant", set()),
    (r"\bstd::regex\b", "regex", set()),
    (r"\b(?:std::)?(?:memcpy|memmove|memset|memcmp|strlen|strcmp|strncmp|strchr|strstr|strerror)\s*\(", "cstring", {"string.h"}),
    (r"\bstd::(?:sqrt|exp|log|log2|log1p|pow|floor|ceil|round|isnan|isinf|isfinite|fabs|tanh|expm1|nextafter|lround|llround)\b", "cmath", {"math.h"}),
    (r"\b(?:std::)?(?:getenv|setenv|unsetenv|strtol|strtoll|strtoul|strtoull|strtod|atoi|atol|mkstemp|mkdtemp)\s*\(|\bstd::(?:exit|abort|_Exit|quick_exit|system|free|malloc)\b",
     "cstdlib", {"stdlib.h"}),
    (r"\b(?:std::)?(?:snprintf|fprintf|printf|fopen|fclose|fread|fwrite|fflush|fgets|fputs|perror|popen|pclose)\s*\(|\bstd::FILE\b|\bFILE\s*\*", "cstdio", {"stdio.h"}),
    (r"\bstd::(?:iota|accumulate|inner_product|partial_sum|gcd|lcm)\b", "numeric", set()),
    (r"\bstd::(?:random_device|mt19937|mt19937_64|uniform_int_distribution|uniform_real_distribution|normal_distribution|shuffle)\b", "random", {"algorithm"}),
    (r"\bstd::(?:future|promise|async|packaged_task)\b", "future", set()),
    (r"\bstd::bitset\b", "bitset", set()),
    (r"\bstd::(?:ostream|istream)\b", "ostream", {"istream", "iostream", "iosfwd", "sstream", "fstream"}),
]
COMPILED = [(re.compile(p), h, alts) for p, h, alts in TABLE]
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
# Names the std:: form above would miss because a file says `using namespace std`: not used here.


def strip_code(text):
    """The text without comments and string/char literals (raw strings too)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]{0,16})\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = ")" + m.group(1) + '"'
            j = text.find(end, i + m.end())
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # not a digit separator (1'000)
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
            out.append('""')
        else:
            out.append(c)
            i += 1
    return "".join(out)


def includes_of(path):
    try:
        return set(INCLUDE.findall(path.read_text(errors="replace")))
    except FileNotFoundError:
        return set()


def paired_header(path):
    for suffix in (".hpp", ".h"):
        h = path.with_suffix(suffix)
        if path.suffix in {".cpp", ".cc"} and h.exists():
            return h
    return None


def missing_in(path):
    text = path.read_text(errors="replace")
    code = strip_code(text)
    have = set(INCLUDE.findall(text))
    pair = paired_header(path)
    if pair:
        have |= includes_of(pair)
    missing = []
    for rx, header, alts in COMPILED:
        if path.suffix == ".h" and header in C_NAMES:
            alts = alts | {C_NAMES[header]}
        if header in have or alts & have:
            continue
        if rx.search(code):
            missing.append(header)
    return missing


# A .h file may be read by C (plugin_api's ABI headers): it names the C headers.
C_NAMES = {"cstdint": "stdint.h", "cstring": "string.h", "cstdlib": "stdlib.h", "cstdio": "stdio.h", "cmath": "math.h"}


def add_includes(path, headers):
    if path.suffix == ".h":
        headers = [C_NAMES.get(h, h) for h in headers]
    """After the file's last standard include; else in a block of their own
    after the header the file implements (or before the first include)."""
    lines = path.read_text().split("\n")
    std = [k for k, l in enumerate(lines) if re.match(r"\s*#\s*include\s*<[a-z_]+(\.h)?>", l) and "/" not in l]
    block = [f"#include <{h}>" for h in headers]
    if std:
        lines[std[-1] + 1:std[-1] + 1] = block
    else:
        incs = [k for k, l in enumerate(lines) if re.match(r"\s*#\s*include", l)]
        pair = paired_header(path)
        if incs and pair and pair.name in lines[incs[0]]:
            lines[incs[0] + 1:incs[0] + 1] = [""] + block
        elif incs:
            lines[incs[0]:incs[0]] = block + [""]
        else:
            pragma = [k for k, l in enumerate(lines) if l.startswith("#pragma once")]
            at = pragma[0] + 1 if pragma else 0
            lines[at:at] = [""] + block
    path.write_text("\n".join(lines))


def main():
    fix = "--fix" in sys.argv[1:]
    files = sorted(p for f in FOLDERS for p in (ROOT / f).rglob("*") if p.suffix in SUFFIXES and "node_modules" not in p.parts)
    bad = 0
    for p in files:
        m = missing_in(p)
        if not m:
            continue
        bad += 1
        rel = p.relative_to(ROOT)
        if fix:
            add_includes(p, m)
            print(f"{rel}: added {', '.join('<' + h + '>' for h in m)}")
        else:
            print(f"{rel}: uses <{'>, <'.join(m)}> without including it")
    if bad and not fix:
        print(f"check_includes: {bad} of {len(files)} files use standard headers they do not include (scripts/check_includes.py --fix adds them)")
        return 1
    print(f"check_includes: {len(files)} files checked, {bad} fixed" if fix else f"check_includes: {len(files)} files, every standard header used is included")
    return 0


if __name__ == "__main__":
    sys.exit(main())
