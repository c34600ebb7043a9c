#!/usr/bin/env bash
# Every curl example in the docs that sends a body says it is JSON: the
# gateway answers 415 to curl's default form content type, so an example
# without the header fails for whoever copies it (issue #28, point 7).
#   docs_curl_examples.sh SOURCE_DIR
set -euo pipefail
/usr/bin/python3 - "$1" <<'PY'
import glob, os, re, sys
bad, checked = [], 0
for path in sorted(glob.glob(os.path.join(sys.argv[1], "docs", "*.md")) + [os.path.join(sys.argv[1], "README.md")]):
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        if re.match(r"\s*curl\b", lines[i]):
            start, block = i, [lines[i]]
            while block[-1].rstrip().endswith("\\") and i + 1 < len(lines):
                i += 1
                block.append(lines[i])
            text = " ".join(block)
            if re.search(r"\s(-d|--data|--data-raw|--data-binary)\s", text):
                checked += 1
                if "Content-Type: application/json" not in text:
                    bad.append(f"{os.path.relpath(path, sys.argv[1])}:{start + 1}: {block[0].strip()[:100]}")
        i += 1
if bad:
    sys.exit("curl examples sending a body without -H 'Content-Type: application/json' (the gateway answers 415):\n" + "\n".join(bad))
if checked == 0:
    sys.exit("no curl example with a body found: the check looks in the wrong place")
print(f"{checked} curl examples with a body, each sent as JSON")
PY
