//! Text from a trace is data: how it is written into each output that is
//! not HTML (the app's Leptos views escape HTML themselves). One rule for
//! which characters are hidden, used by the upload's checks of names, tags
//! and notes, by the CLI's text, by the pull-request comment's markdown and
//! by MCP's answers.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Characters that do not show as themselves: controls (C0, DEL, C1: ESC
/// starts terminal sequences, a line break starts a GitHub Actions workflow
/// command), bidirectional marks, overrides and isolates (text reads other
/// than it is stored), zero-width and other invisible format characters
/// (two names look alike), and Unicode tag characters (invisible text an
/// agent still reads).
pub fn hidden_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{034F}'
                | '\u{061C}'
                | '\u{115F}'
                | '\u{1160}'
                | '\u{17B4}'
                | '\u{17B5}'
                | '\u{180B}'..='\u{180F}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{3164}'
                | '\u{FE00}'..='\u{FE0F}'
                | '\u{FEFF}'
                | '\u{FFA0}'
                | '\u{FFF0}'..='\u{FFFB}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E0FFF}'
        )
}

/// `s` with every hidden character written as an escape (`\n`, `\r`, `\t`,
/// `\u{1b}`), and a backslash that would read as one doubled: what the CLI
/// prints and what MCP answers, so no trace text moves a terminal's cursor,
/// opens a link, starts a workflow command or hides text.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| hidden_char(c) || c == '\\') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if hidden_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// `s` as a markdown code span that nothing in it can break: hidden
/// characters as escapes ([`visible`]), a fence of more backticks than any
/// run inside, and `|` escaped (GitHub's tables split a row at a bare `|`
/// even inside a code span, and show `\|` there as `|`). A code span holds
/// no link, image, HTML, emphasis or mention.
pub fn md_code(s: &str) -> String {
    if s.is_empty() {
        return String::new();
    }
    let v = visible(s);
    let longest = v.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    // A space on each side when the text starts or ends with a backtick or
    // a space (CommonMark strips one of each).
    let pad = if v.starts_with(['`', ' ']) || v.ends_with(['`', ' ']) {
        " "
    } else {
        ""
    };
    let body = v.replace('|', "\\|");
    format!("{fence}{pad}{body}{pad}{fence}")
}

/// `s` as markdown prose that reads as written: hidden characters as
/// escapes, and backslash escapes on exactly what markdown (GitHub's
/// flavour) would read as markup, so the raw comment stays readable:
/// `\` `` ` `` `*` `[` `]` `<` `|` `~` `$` always (no emphasis, code,
/// link, image, raw HTML, table cell break, strikethrough or math), `_`
/// where it could open emphasis (not after a word: `aten::copy_` stays),
/// `&` before a letter or `#` (no entity), `:` before `//` and `.` after
/// `www` (no autolink), and `@` and `#` followed by a word joiner (no
/// mention, no issue reference). Text is written mid-line, so line-start
/// markers (`#`, `-`, `>`, `1.`) need nothing more.
pub fn md_text(s: &str) -> String {
    let v = visible(s);
    let mut out = String::with_capacity(v.len() + 16);
    let chars: Vec<char> = v.chars().collect();
    let word = |i: Option<&char>| i.is_some_and(|c| c.is_alphanumeric());
    for (i, &c) in chars.iter().enumerate() {
        let (before, after) = (
            i.checked_sub(1).and_then(|j| chars.get(j)),
            chars.get(i + 1),
        );
        match c {
            '@' | '#' => {
                out.push('\\');
                out.push(c);
                out.push('\u{2060}');
            }
            '\\' | '`' | '*' | '[' | ']' | '<' | '|' | '~' | '$' => {
                out.push('\\');
                out.push(c);
            }
            // Only an underscore that could open emphasis: none follows a
            // word (`aten::copy_`), and one before a space opens nothing.
            '_' if !word(before) && after.is_some_and(|a| !a.is_whitespace()) => {
                out.push_str("\\_")
            }
            '&' if after.is_some_and(|a| a.is_ascii_alphabetic() || *a == '#') => {
                out.push_str("\\&")
            }
            ':' if after == Some(&'/') && chars.get(i + 2) == Some(&'/') => {
                out.push_str("\\:");
            }
            '.' if i >= 3
                && chars[i - 3..i]
                    .iter()
                    .collect::<String>()
                    .eq_ignore_ascii_case("www") =>
            {
                out.push_str("\\.");
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_characters_show_as_escapes() {
        assert_eq!(visible("aten::mm"), "aten::mm");
        assert_eq!(
            visible("a\nb\r\u{1b}]8;;x\u{7}\u{202e}\u{e0041}\0\\"),
            "a\\nb\\r\\u{1b}]8;;x\\u{7}\\u{202e}\\u{e0041}\\u{0}\\\\"
        );
        for c in [
            '\u{61c}',
            '\u{ad}',
            '\u{180e}',
            '\u{3164}',
            '\u{fff9}',
            '\u{e007f}',
        ] {
            assert!(hidden_char(c), "{c:?}");
        }
        assert!(!hidden_char('é') && !hidden_char('→'));
    }

    #[test]
    fn code_spans_cannot_be_broken() {
        assert_eq!(md_code("aten::mm"), "`aten::mm`");
        assert_eq!(md_code("a`b"), "``a`b``");
        assert_eq!(md_code("`x"), "`` `x ``");
        assert_eq!(md_code("a|b\nc"), "`a\\|b\\nc`");
        assert_eq!(
            md_text("[x](http://www.e.com) @bob #1 a->b aten::copy_ _em_ &amp;"),
            "\\[x\\](http\\://www\\.e.com) \\@\u{2060}bob \\#\u{2060}1 a->b aten::copy_ \\_em_ \\&amp;"
        );
    }
}
