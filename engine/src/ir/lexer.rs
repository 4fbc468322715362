//! Lexer of the `.pir` text format: a hand-written scanner over bytes that produces tokens
//! on demand. Tokens are spans into the source; no token allocates.

/// The kind of a token.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Tok {
    /// End of input.
    Eof,
    /// `[A-Za-z_][A-Za-z0-9_.]*`: keywords, op names, dtypes, attribute keys.
    Ident,
    /// `%name`.
    Local,
    /// `@name`.
    Global,
    /// A number with an optional suffix (`2.0f`, `-3i64`, `1e-8`, `-inf`); after a `.`, only
    /// digits (a projection index).
    Number,
    /// A `"…"` string with escapes.
    Str,
    /// A string without its closing quote.
    UnterminatedStr,
    /// A byte that starts no token.
    Bad,
    LParen,
    RParen,
    LBrack,
    RBrack,
    LBrace,
    RBrace,
    Lt,
    Gt,
    Comma,
    Semi,
    Colon,
    Eq,
    Dot,
    Arrow,
    Hash,
}

/// Which keyword an identifier is, decided once by the lexer so that the parser compares a
/// byte instead of strings (keywords are checked at every binding and every call).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kw {
    /// Not a keyword (or not an identifier).
    None,
    Def,
    Let,
    If,
    Else,
    Fn,
    /// `tensor`, a dense constant.
    Tensor,
    Full,
    Uniform,
    Normal,
    True,
    False,
    /// `Tensor`, a tensor type.
    TensorTy,
    /// `resource`, a reference to a blob of the resources section.
    Resource,
    /// `resources`, the section of blobs after the functions.
    Resources,
    /// `prim`, a loop-level function.
    Prim,
}

impl Kw {
    /// The keyword's text.
    pub fn text(self) -> &'static str {
        match self {
            Kw::None => "",
            Kw::Def => "def",
            Kw::Let => "let",
            Kw::If => "if",
            Kw::Else => "else",
            Kw::Fn => "fn",
            Kw::Tensor => "tensor",
            Kw::Full => "full",
            Kw::Uniform => "uniform",
            Kw::Normal => "normal",
            Kw::True => "true",
            Kw::False => "false",
            Kw::TensorTy => "Tensor",
            Kw::Resource => "resource",
            Kw::Resources => "resources",
            Kw::Prim => "prim",
        }
    }
}

/// The keyword spelled by `name` (an identifier), or [`Kw::None`]. Dispatches on the first
/// byte and the length so that most names are rejected without comparing bytes.
#[inline(always)]
fn keyword(name: &[u8]) -> Kw {
    let candidate = match (name.first().copied().unwrap_or(0), name.len()) {
        (b'd', 3) => Kw::Def,
        (b'l', 3) => Kw::Let,
        (b'i', 2) => Kw::If,
        (b'e', 4) => Kw::Else,
        (b'f', 2) => Kw::Fn,
        (b'f', 4) => Kw::Full,
        (b'f', 5) => Kw::False,
        (b't', 4) => Kw::True,
        (b't', 6) => Kw::Tensor,
        (b'u', 7) => Kw::Uniform,
        (b'n', 6) => Kw::Normal,
        (b'T', 6) => Kw::TensorTy,
        (b'r', 8) => Kw::Resource,
        (b'r', 9) => Kw::Resources,
        (b'p', 4) => Kw::Prim,
        _ => return Kw::None,
    };
    // The lengths are equal; a byte loop of at most 9 steps beats a `memcmp` call.
    if name.iter().zip(candidate.text().as_bytes()).all(|(a, b)| a == b) {
        candidate
    } else {
        Kw::None
    }
}

/// One token: its kind and byte range. For numbers, `aux` is where the suffix starts. For
/// identifiers, `kw` says which keyword it is.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token {
    pub kind: Tok,
    pub kw: Kw,
    pub start: u32,
    pub end: u32,
    pub aux: u32,
}

/// Scans tokens from a source string.
pub(crate) struct Lexer<'s> {
    src: &'s [u8],
    pos: usize,
    after_dot: bool,
}

/// `NAME_BYTE[b]`: whether byte `b` continues a name without looking further (`[A-Za-z0-9_]`).
static NAME_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'_';
        b += 1;
    }
    t
};

/// What a token starting with byte `b` is, as far as its first byte tells: `CLASS[b]` is one
/// of the `C_*` classes, and for punctuation `PUNCT[b]` is its kind. One table load replaces a
/// chain of comparisons on every token and every byte of whitespace.
const C_OTHER: u8 = 0;
const C_SPACE: u8 = 1;
const C_PUNCT: u8 = 2;
const C_SLASH: u8 = 3;
const C_DIGIT: u8 = 4;
const C_MINUS: u8 = 5;
const C_SIGIL: u8 = 6;
const C_QUOTE: u8 = 7;
const C_IDENT: u8 = 8;
const C_DOT: u8 = 9;

static CLASS: [u8; 256] = {
    let mut t = [C_OTHER; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = match c {
            b' ' | b'\t' | b'\r' | b'\n' => C_SPACE,
            b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'<' | b'>' | b',' | b';' | b':' | b'=' | b'#' => C_PUNCT,
            b'/' => C_SLASH,
            b'0'..=b'9' => C_DIGIT,
            b'-' => C_MINUS,
            b'%' | b'@' => C_SIGIL,
            b'"' => C_QUOTE,
            b'.' => C_DOT,
            _ if c.is_ascii_alphabetic() || c == b'_' => C_IDENT,
            _ => C_OTHER,
        };
        b += 1;
    }
    t
};

/// The kind of each punctuation byte (`Tok::Bad` for the others).
static PUNCT: [Tok; 256] = {
    let mut t = [Tok::Bad; 256];
    t[b'(' as usize] = Tok::LParen;
    t[b')' as usize] = Tok::RParen;
    t[b'[' as usize] = Tok::LBrack;
    t[b']' as usize] = Tok::RBrack;
    t[b'{' as usize] = Tok::LBrace;
    t[b'}' as usize] = Tok::RBrace;
    t[b'<' as usize] = Tok::Lt;
    t[b'>' as usize] = Tok::Gt;
    t[b',' as usize] = Tok::Comma;
    t[b';' as usize] = Tok::Semi;
    t[b':' as usize] = Tok::Colon;
    t[b'=' as usize] = Tok::Eq;
    t[b'#' as usize] = Tok::Hash;
    t
};

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// Whether the name continues at `i`: `[A-Za-z0-9_]`, or a `.` followed by a letter or `_`
/// (a `.` before a digit starts a projection, as in `%t.1`).
fn continues_name(src: &[u8], i: usize) -> bool {
    let at = |i: usize| src.get(i).copied().unwrap_or(0);
    let b = at(i);
    b.is_ascii_alphanumeric() || b == b'_' || (b == b'.' && is_ident_start(at(i + 1)))
}

/// Whether `name` lexes back as the whole of one `@name` (or `%name`) token: non-empty,
/// `[A-Za-z0-9_]` bytes and `.` only before a letter or `_`.
pub(crate) fn is_valid_name(name: &str) -> bool {
    !name.is_empty() && Lexer::new(name).name_end(0) == name.len()
}

impl<'s> Lexer<'s> {
    /// A lexer over `src`. A byte-order mark at the very start is skipped, as rustc and Python
    /// do (editors on Windows write one); anywhere else it is an error shown as `\u{feff}`.
    pub fn new(src: &'s str) -> Lexer<'s> {
        let pos = if src.starts_with('\u{feff}') { 3 } else { 0 };
        Lexer { src: src.as_bytes(), pos, after_dot: false }
    }

    fn at(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    /// The end of the name that continues at `i` (see [`continues_name`]).
    #[inline(always)]
    fn name_end(&self, mut i: usize) -> usize {
        let src = self.src;
        while let Some(&b) = src.get(i) {
            if NAME_BYTE[b as usize] || (b == b'.' && continues_name(src, i)) {
                i += 1;
            } else {
                break;
            }
        }
        i
    }

    /// The next token.
    #[inline]
    pub fn next_token(&mut self) -> Token {
        let src = self.src;
        let mut pos = self.pos;
        let after_dot = std::mem::replace(&mut self.after_dot, false);
        let tok = |kind, start: usize, end: usize| Token {
            kind,
            kw: Kw::None,
            start: start as u32,
            end: end as u32,
            aux: end as u32,
        };
        // Whitespace and comments, then the token's first byte decides its kind. The hot kinds
        // (punctuation, `%name`, `@name`, identifiers) return at once.
        let (start, class) = loop {
            let Some(&b) = src.get(pos) else {
                self.pos = pos;
                return tok(Tok::Eof, pos, pos);
            };
            match CLASS[b as usize] {
                C_SPACE => pos += 1,
                C_SLASH if src.get(pos + 1) == Some(&b'/') => {
                    pos += src[pos..].iter().position(|&b| b == b'\n').unwrap_or(src.len() - pos);
                }
                C_PUNCT => {
                    self.pos = pos + 1;
                    return tok(PUNCT[b as usize], pos, pos + 1);
                }
                C_IDENT => {
                    let end = self.name_end(pos + 1);
                    self.pos = end;
                    let kw = keyword(&src[pos..end]);
                    return Token { kind: Tok::Ident, kw, start: pos as u32, end: end as u32, aux: end as u32 };
                }
                C_SIGIL => {
                    let end = self.name_end(pos + 1);
                    // Ends after an ASCII byte, so on a character boundary.
                    self.pos = end;
                    let kind = match (end == pos + 1, b == b'%') {
                        (true, _) => Tok::Bad,
                        (false, true) => Tok::Local,
                        (false, false) => Tok::Global,
                    };
                    return tok(kind, pos, end);
                }
                class => break (pos, class),
            }
        };
        self.pos = start;
        let (kind, end) = match class {
            C_DOT => {
                self.after_dot = true;
                (Tok::Dot, start + 1)
            }
            C_MINUS if self.at(start + 1) == b'>' => (Tok::Arrow, start + 2),
            C_DIGIT if after_dot => {
                let mut i = start;
                while self.at(i).is_ascii_digit() {
                    i += 1;
                }
                (Tok::Number, i)
            }
            C_DIGIT | C_MINUS => return self.number(start),
            C_QUOTE => {
                // The two bytes that matter in a string are found with `memchr2` (vectorised):
                // a `resources` entry is a string of megabytes of hex.
                let mut i = start + 1;
                loop {
                    match memchr::memchr2(b'"', b'\\', &src[i..]) {
                        Some(k) if src[i + k] == b'"' => break (Tok::Str, i + k + 1),
                        Some(k) if i + k + 1 < src.len() => i += k + 2,
                        _ => break (Tok::UnterminatedStr, src.len()),
                    }
                }
            }
            _ => {
                // A lone `/` or a byte that starts no token. Take the whole UTF-8 character so
                // the token text stays a valid `str`.
                let mut i = start + 1;
                while i < src.len() && (src[i] & 0xC0) == 0x80 {
                    i += 1;
                }
                (Tok::Bad, i)
            }
        };
        // A string may end inside a multi-byte character only if escapes split one; keep ends
        // on character boundaries. Other tokens end after an ASCII byte.
        let mut end = end.min(src.len());
        if matches!(kind, Tok::Str | Tok::UnterminatedStr | Tok::Bad) {
            while end < src.len() && (src[end] & 0xC0) == 0x80 {
                end += 1;
            }
        }
        self.pos = end;
        tok(kind, start, end)
    }

    fn number(&mut self, start: usize) -> Token {
        let mut i = start;
        if self.at(i) == b'-' {
            i += 1;
            if self.src[i..].starts_with(b"inf") && !continues_name(self.src, i + 3) {
                i += 3;
                self.pos = i;
                return Token { kind: Tok::Number, kw: Kw::None, start: start as u32, end: i as u32, aux: i as u32 };
            }
            if !self.at(i).is_ascii_digit() {
                self.pos = i;
                return Token { kind: Tok::Bad, kw: Kw::None, start: start as u32, end: i as u32, aux: i as u32 };
            }
        }
        while self.at(i).is_ascii_digit() {
            i += 1;
        }
        if self.at(i) == b'.' && self.at(i + 1).is_ascii_digit() {
            i += 1;
            while self.at(i).is_ascii_digit() {
                i += 1;
            }
        }
        if matches!(self.at(i), b'e' | b'E') {
            let sign = matches!(self.at(i + 1), b'+' | b'-') as usize;
            if self.at(i + 1 + sign).is_ascii_digit() {
                i += 1 + sign;
                while self.at(i).is_ascii_digit() {
                    i += 1;
                }
            }
        }
        let aux = i;
        while self.at(i).is_ascii_alphanumeric() || self.at(i) == b'_' {
            i += 1;
        }
        self.pos = i;
        Token { kind: Tok::Number, kw: Kw::None, start: start as u32, end: i as u32, aux: aux as u32 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<(Tok, Kw, &str)> {
        let mut lexer = Lexer::new(src);
        let mut out = Vec::new();
        loop {
            let t = lexer.next_token();
            if t.kind == Tok::Eof {
                return out;
            }
            out.push((t.kind, t.kw, &src[t.start as usize..t.end as usize]));
        }
    }

    #[test]
    fn lexer_marks_exactly_the_keywords() {
        let src = "def let if else fn tensor full uniform normal true false Tensor resource resources \
                   lets tanh truex fnord d e Tensors tensor.x iff le f32";
        let got: Vec<(Kw, &str)> = kinds(src)
            .into_iter()
            .map(|(k, kw, text)| {
                assert_eq!(k, Tok::Ident, "{text}");
                (kw, text)
            })
            .collect();
        let keywords = [
            Kw::Def,
            Kw::Let,
            Kw::If,
            Kw::Else,
            Kw::Fn,
            Kw::Tensor,
            Kw::Full,
            Kw::Uniform,
            Kw::Normal,
            Kw::True,
            Kw::False,
            Kw::TensorTy,
            Kw::Resource,
            Kw::Resources,
        ];
        for (i, kw) in keywords.iter().enumerate() {
            assert_eq!(got[i], (*kw, kw.text()));
        }
        for (kw, text) in &got[keywords.len()..] {
            assert_eq!(*kw, Kw::None, "{text} is not a keyword");
        }
        assert_eq!(got.len(), keywords.len() + 11);
    }

    #[test]
    fn strings_end_at_the_first_unescaped_quote() {
        let cases: [(&str, &[(Tok, &str)]); 7] = [
            (r#""abc" x"#, &[(Tok::Str, r#""abc""#), (Tok::Ident, "x")]),
            (r#""a\"b" x"#, &[(Tok::Str, r#""a\"b""#), (Tok::Ident, "x")]),
            (r#""a\\" x"#, &[(Tok::Str, r#""a\\""#), (Tok::Ident, "x")]),
            ("\"\u{e9}\\\u{e9}\" x", &[(Tok::Str, "\"\u{e9}\\\u{e9}\""), (Tok::Ident, "x")]),
            (r#""abc"#, &[(Tok::UnterminatedStr, r#""abc"#)]),
            ("\"ab\\", &[(Tok::UnterminatedStr, "\"ab\\")]),
            ("\"ab\\\"", &[(Tok::UnterminatedStr, "\"ab\\\"")]),
        ];
        for (src, expect) in cases {
            let got: Vec<(Tok, &str)> = kinds(src).into_iter().map(|(k, _, text)| (k, text)).collect();
            assert_eq!(got, expect, "{src:?}");
        }
        // A long string (a resource's hex) is one token.
        let hex = format!("\"{}\";", "0123456789abcdef".repeat(10_000));
        let got: Vec<(Tok, &str)> = kinds(&hex).into_iter().map(|(k, _, text)| (k, text)).collect();
        assert_eq!(got, [(Tok::Str, &hex[..hex.len() - 1]), (Tok::Semi, ";")]);
    }

    #[test]
    fn lexer_fast_paths_keep_token_kinds_and_spans() {
        let got = kinds("let %v1 = add(%x, @g).0;% @ -> #[a]{}<>:\u{e9}");
        let expect = [
            (Tok::Ident, "let"),
            (Tok::Local, "%v1"),
            (Tok::Eq, "="),
            (Tok::Ident, "add"),
            (Tok::LParen, "("),
            (Tok::Local, "%x"),
            (Tok::Comma, ","),
            (Tok::Global, "@g"),
            (Tok::RParen, ")"),
            (Tok::Dot, "."),
            (Tok::Number, "0"),
            (Tok::Semi, ";"),
            (Tok::Bad, "%"),
            (Tok::Bad, "@"),
            (Tok::Arrow, "->"),
            (Tok::Hash, "#"),
            (Tok::LBrack, "["),
            (Tok::Ident, "a"),
            (Tok::RBrack, "]"),
            (Tok::LBrace, "{"),
            (Tok::RBrace, "}"),
            (Tok::Lt, "<"),
            (Tok::Gt, ">"),
            (Tok::Colon, ":"),
            (Tok::Bad, "\u{e9}"),
        ];
        let got: Vec<(Tok, &str)> = got.into_iter().map(|(k, _, t)| (k, t)).collect();
        assert_eq!(got, expect);
    }
}
