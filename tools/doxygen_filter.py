#!/usr/bin/env python3
"""Doxygen's INPUT_FILTER for magpie's public headers (tools/docs.sh, docs/Doxyfile).

The headers document each declaration with a plain `//` block directly above it whose first
sentence starts with the declared name, and a field with a `//` comment at the end of its
line. Doxygen reads only `///`-style comments, so this filter turns, at namespace and class
scope (never inside a function body):
  * the block above a declaration into `///` lines;
  * a comment at the end of a declaration's line into `///<`;
  * the block at the top of a file, before `#pragma once`, into the file's description;
  * `protected:` into `private:` (protected members serve magpie's own layers);
  * a block that documents several declarations at once (overloads, a pair of
    constructors) into the documentation of each of them: the later declarations of the
    name the block starts with get a copy.
A block followed by a blank line is a section comment and stays plain. Inside converted text,
`<` outside backticks is escaped (prose such as task<int> is not HTML) and lines indented as
code become Markdown code blocks. The output has as many lines as the input, so Doxygen's
warnings name the header's own line numbers.
In Markdown pages (README.md, docs/*.md) it joins code spans broken across lines.
  tools/doxygen_filter.py HEADER-OR-PAGE
"""
import re
import sys

SCOPE_OPENER = re.compile(
    r"^(template\s*<.*>\s*)?(\[\[[^\]]*\]\]\s*)?"
    r"(inline\s+)?(namespace|class|struct|union|enum(\s+class|\s+struct)?)\b")
ACCESS = re.compile(r"^\s*(public|private|protected)\s*:")
# A declared name as a comment starts with it: `f`, `f(args)`, `operator=`, `operator[]`;
# NAMES is a list of them, "a, b and c".
NAME = r"(?:operator(?:\(\)|\[\]|[^\s(,]+)|[~\w]+)(?:\([^)]*\))?"
NAMES = rf"{NAME}(?:(?:,\s*|\s+and\s+){NAME})*"
COMMENT_LINE = re.compile(r"^(\s*)//(?![/!])(.*)$")


def comment_start(line):
    """comment_start returns where the line's `//` comment starts (its length if none)."""
    i = 0
    quote = None
    while i < len(line):
        char = line[i]
        if quote:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "\"'":
            quote = char
        elif line.startswith("//", i):
            return i
        i += 1
    return len(line)


def code_of(line):
    """code_of returns the line without string and character literals and comments."""
    line = line[:comment_start(line)]
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return re.sub(r"'(\\.|[^'\\])*'", "''", line)


def escape_prose(text):
    """escape_prose escapes `<` outside backtick spans, so Doxygen reads no HTML tags."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", r"\<").replace(">", r"\>")
    return "`".join(parts)


def doc_text(body):
    """doc_text turns the text after `//` into Doxygen text: a line indented as code (three
    spaces or more) becomes a Markdown code line, verbatim; prose is escaped."""
    if re.match(r"^ {3,}\S", body):
        return "    " + body
    return escape_prose(body)


def convert_block(lines, marker):
    """convert_block turns a run of `//` lines into `marker` lines."""
    out = []
    for line in lines:
        match = COMMENT_LINE.match(line)
        out.append(f"{match.group(1)}{marker}{doc_text(match.group(2))}")
    return out


class Scopes:
    """Scopes tracks the braces: which of the open ones are namespaces or classes."""

    def __init__(self):
        self.stack = []      # True: a namespace/class/enum scope; False: a body or initializer
        self.statement = ""  # code since the last ; { or }

    def at_declaration_scope(self):
        return all(self.stack)

    def depth(self):
        return len(self.stack)

    def feed(self, line):
        if line.strip().startswith("#"):
            return
        for char in ACCESS.sub("", code_of(line)):
            if char == "{":
                self.stack.append(bool(SCOPE_OPENER.match(self.statement.strip())) or
                                  self.statement.strip().startswith('extern "C"'))
                self.statement = ""
            elif char == "}":
                if self.stack:
                    self.stack.pop()
                self.statement = ""
            elif char == ";":
                self.statement = ""
            else:
                self.statement += char
        self.statement += " "


def declaration_run(lines, start, scopes_depth):
    """declaration_run returns (end, starts, opens_scope) for the declarations from `start`:
    the lines up to a blank line, a comment, an access label, a preprocessor line or the end
    of the enclosing scope; starts holds the first line of each declaration in it."""
    probe = Scopes()
    probe.stack = [True] * scopes_depth
    starts = [start]
    ended = False
    opens_scope = False
    i = start
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if (i > start and probe.depth() == scopes_depth and
                (stripped == "" or stripped.startswith("//") or stripped.startswith("#") or
                 ACCESS.match(line) or stripped.startswith("}"))):
            break
        if ended and stripped:
            starts.append(i)
            ended = False
        for char in code_of(line):
            if char == "{":
                opening = probe.statement.strip()
                is_scope = bool(SCOPE_OPENER.match(opening))
                if probe.depth() == scopes_depth and is_scope:
                    opens_scope = True
                probe.stack.append(is_scope)
                probe.statement = ""
            elif char == "}":
                probe.stack.pop()
                probe.statement = ""
                if probe.depth() == scopes_depth:
                    ended = True
            elif char == ";":
                if probe.depth() == scopes_depth:
                    ended = True
                probe.statement = ""
            else:
                probe.statement += char
        probe.statement += " "
        if probe.depth() < scopes_depth:
            break
        i += 1
    if starts and starts[-1] >= i:
        starts.pop()
    return i, starts, opens_scope


def filter_header(text):
    """filter_header is the header as Doxygen should read it (see the module's docstring)."""
    lines = text.split("\n")
    out = list(lines)
    scopes = Scopes()
    copies = {}
    i = 0
    seen_code = False
    while i < len(lines):
        line = lines[i]
        if re.match(r"^\s*protected\s*:", line):
            # Protected members serve magpie's own derived classes (the compat layer's
            # handles), not users: the reference leaves them out as it does private ones.
            out[i] = line.replace("protected", "private", 1)
        if COMMENT_LINE.match(line):
            j = i
            while j < len(lines) and COMMENT_LINE.match(lines[j]):
                j += 1
            block = lines[i:j]
            following = lines[j].strip() if j < len(lines) else ""
            if not seen_code and (following == "" or following.startswith("#pragma")):
                if following.startswith("#pragma") or i == 0:
                    converted = convert_block(block, "///")
                    # \file takes a name from the rest of its line: it ends the last line
                    converted[-1] += " \\file"
                    out[i:j] = converted
                    for line_no in range(i, j):
                        scopes.feed(lines[line_no])
                    i = j
                    continue
            if (scopes.at_declaration_scope() and following and not following.startswith("#")
                    and not following.startswith("}") and not ACCESS.match(lines[j])
                    and not following.startswith("//")):
                converted = convert_block(block, "///")
                end, starts, opens_scope = declaration_run(lines, j, scopes.depth())
                if len(starts) > 1 and not opens_scope:
                    # The block documents each declaration of the run: the later ones get
                    # a copy on their first line, which keeps the line count.
                    copy = " ".join(COMMENT_LINE.match(line).group(2).strip() for line in block)
                    # the names the block starts with: "a", or "a, b and c"
                    leading = re.match(NAMES, copy)
                    names = [re.sub(r"(?<=\w)\(.*\)$", "", name)
                             for name in re.split(r",\s*|\s+and\s+", leading.group(0))] if leading else []
                    copy = escape_prose(copy).replace("*/", "* /")
                    for first in starts[1:]:
                        # only overloads of the name the block starts with, and only lines
                        # without a comment of their own
                        declaration = code_of(lines[first])
                        if declaration.strip().startswith("template") and first + 1 < len(lines):
                            declaration += " " + code_of(lines[first + 1])
                        if any(re.search(r"(?<![\w~])" + re.escape(name) + r"\s*\(|\busing\s+" +
                                         re.escape(name) + r"\b", declaration)
                               for name in names) and \
                                comment_start(lines[first]) == len(lines[first]):
                            copies[first] = f"/** {copy} */ "
                out[i:j] = converted
            for line_no in range(i, j):
                scopes.feed(lines[line_no])
            i = j
            continue
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            seen_code = True
        if scopes.at_declaration_scope() and "//" in line and not stripped.startswith("//"):
            start = comment_start(line)
            code, comment = line[:start], line[start:]
            if comment.startswith("//") and not comment.startswith("///") and code.strip() and \
                    re.search(r"[;,{]\s*$|^\s*\w+\s*(=\s*[^,]*)?,?\s*$", code_of(code)):
                out[i] = code + "///<" + escape_prose(comment[2:])
        scopes.feed(line)
        i += 1
    for first, copy in copies.items():
        indent = len(out[first]) - len(out[first].lstrip())
        out[first] = out[first][:indent] + copy + out[first][indent:]
    return "\n".join(out)


def filter_markdown(text):
    """filter_markdown joins a code span broken across two lines of a paragraph (Doxygen
    reads code spans within one line only) and pays the line back with a blank line at the
    paragraph's end, so line numbers stay right outside the paragraph; and doubles the
    backticks of a code span holding a quote."""
    lines = text.split("\n")
    out = []
    owed = 0
    fenced = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        if line.strip() == "":
            out.extend([""] * owed)
            owed = 0
        if (not fenced and line.count("`") % 2 == 1 and i + 1 < len(lines) and
                lines[i + 1].strip() and lines[i + 1].count("`") % 2 == 1):
            out.append(line.rstrip() + " " + lines[i + 1].lstrip())
            owed += 1
            i += 2
            continue
        out.append(line)
        i += 1
    out.extend([""] * owed)
    # Doxygen ends a single-backtick code span at a quote inside it; doubled backticks hold.
    return "\n".join(double_quoted_spans(line) for line in out)


def double_quoted_spans(line):
    """double_quoted_spans doubles the backticks of each code span of the line that holds a
    quote; lines with doubled backticks already, or an odd count, are left alone."""
    if "``" in line or line.count("`") % 2 == 1:
        return line
    parts = line.split("`")
    for i in range(1, len(parts), 2):
        parts[i] = f"`{parts[i]}`" if "'" in parts[i] else parts[i]
    return "`".join(parts)


def main():
    with open(sys.argv[1], encoding="utf-8") as source:
        text = source.read()
    sys.stdout.write(filter_markdown(text) if sys.argv[1].endswith(".md") else filter_header(text))


if __name__ == "__main__":
    main()
