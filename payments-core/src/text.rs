//! Characters that make text read differently from what it is: bidirectional controls, which
//! reorder what follows them (`abc`, U+202E, `fed` shows as `abcdef`), and invisible characters, which
//! make two different strings look the same. Names and metadata values refuse them, since
//! they are shown on pages, in terminals and in logs.

/// Whether `c` is a bidirectional control: U+061C ARABIC LETTER MARK, U+200E and U+200F
/// (the left-to-right and right-to-left marks), U+202A..U+202E (embeddings and overrides) and
/// U+2066..U+2069 (isolates).
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// Whether `c` is a character that shows nothing: the zero-width space, non-joiner and joiner
/// (U+200B..U+200D), the word joiner and invisible operators (U+2060..U+2064), the deprecated
/// format controls (U+206A..U+206F), the byte order mark (U+FEFF), the soft hyphen (U+00AD),
/// the Mongolian vowel separator (U+180E), the interlinear annotation controls
/// (U+FFF9..U+FFFB) and the tag characters (U+E0000..U+E007F, which can carry hidden text).
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{2064}'
            | '\u{206A}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Whether `c` is the line or the paragraph separator (U+2028, U+2029): not control
/// characters to Rust, but line breaks to a page or a terminal.
pub fn is_line_separator(c: char) -> bool {
    matches!(c, '\u{2028}' | '\u{2029}')
}

/// What kind of character that makes text read differently `c` is, if it is one: a phrase for
/// an error message.
pub fn misleading(c: char) -> Option<&'static str> {
    if is_bidi_control(c) {
        Some("a bidirectional control")
    } else if is_invisible(c) {
        Some("a zero-width or invisible character")
    } else if is_line_separator(c) {
        Some("a line or paragraph separator")
    } else {
        None
    }
}

/// `U+202E`: how an error names a character.
pub fn code_point(c: char) -> String {
    format!("U+{:04X}", u32::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listed_characters_and_nothing_visible() {
        for c in [
            '\u{061C}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202E}', '\u{2066}', '\u{2069}',
        ] {
            assert_eq!(misleading(c), Some("a bidirectional control"), "{c:?}");
        }
        for c in [
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{00AD}',
            '\u{E0041}',
        ] {
            assert_eq!(
                misleading(c),
                Some("a zero-width or invisible character"),
                "{c:?}"
            );
        }
        assert!(misleading('\u{2028}').is_some());
        for c in [
            'a', 'я', '№', '«', ' ', '\u{00A0}', 'é', '😀', '\u{FE0F}', '\u{0301}',
        ] {
            assert_eq!(misleading(c), None, "{c:?}");
        }
        assert_eq!(code_point('\u{202E}'), "U+202E");
        assert_eq!(code_point('\u{E0041}'), "U+E0041");
    }
}
