//! Base64url without padding (RFC 4648 §5), decoding only: the three parts of
//! a pass, on every reservation that carries one. The `base64` crate's engine
//! spends ~10 instructions a character on them (a tenth of what checking a
//! pass costs beside its SHA-256); a table and one test per four characters
//! spend about half.
//!
//! As strict as that crate's `URL_SAFE_NO_PAD` (a test holds them equal):
//! only the 64 characters of the URL-safe alphabet, no `=`, no length of
//! 4n + 1, and the unused low bits of the last character zero — so a decoded
//! value has one spelling, and a pass cannot be re-spelled into another text
//! that still verifies.

/// Why a text is no base64url.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NotBase64Url;

/// Marks a byte outside the alphabet; every value inside is below 64.
const OUTSIDE: u8 = 0xFF;

/// Each byte's 6-bit value, or [`OUTSIDE`].
static VALUES: [u8; 256] = values();

const fn values() -> [u8; 256] {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut table = [OUTSIDE; 256];
    let mut i = 0;
    while i < 64 {
        table[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    table
}

/// How many bytes `text_len` characters decode to, if that length can be
/// base64url without padding.
pub(super) fn decoded_len(text_len: usize) -> Result<usize, NotBase64Url> {
    match text_len % 4 {
        1 => Err(NotBase64Url),
        0 => Ok(text_len / 4 * 3),
        rest => Ok(text_len / 4 * 3 + rest - 1),
    }
}

/// Decodes `text` into `out`, whose length is `decoded_len(text.len())`.
pub(super) fn decode_into(text: &[u8], out: &mut [u8]) -> Result<(), NotBase64Url> {
    if decoded_len(text.len()) != Ok(out.len()) {
        return Err(NotBase64Url);
    }
    let quads = text.chunks_exact(4);
    let tail = quads.remainder();
    let (whole, last) = out.split_at_mut(text.len() / 4 * 3);
    for (quad, bytes) in quads.zip(whole.chunks_exact_mut(3)) {
        let a = VALUES[usize::from(quad[0])];
        let b = VALUES[usize::from(quad[1])];
        let c = VALUES[usize::from(quad[2])];
        let d = VALUES[usize::from(quad[3])];
        if (a | b | c | d) >= 64 {
            return Err(NotBase64Url);
        }
        bytes[0] = a << 2 | b >> 4;
        bytes[1] = b << 4 | c >> 2;
        bytes[2] = c << 6 | d;
    }
    // Two or three characters left: one or two bytes, the bits below them zero.
    let mut n = 0u32;
    for (i, &ch) in tail.iter().enumerate() {
        let v = VALUES[usize::from(ch)];
        if v >= 64 {
            return Err(NotBase64Url);
        }
        n |= u32::from(v) << (18 - 6 * i);
    }
    let [_, hi, mid, lo] = n.to_be_bytes();
    match last {
        [] => Ok(()),
        [x] if mid == 0 && lo == 0 => {
            *x = hi;
            Ok(())
        }
        [x, y] if lo == 0 => {
            *x = hi;
            *y = mid;
            Ok(())
        }
        _ => Err(NotBase64Url),
    }
}

#[cfg(test)]
mod tests {
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    use super::*;

    fn decode(text: &str) -> Result<Vec<u8>, NotBase64Url> {
        let mut out = vec![0; decoded_len(text.len())?];
        decode_into(text.as_bytes(), &mut out)?;
        Ok(out)
    }

    /// A small deterministic generator (xorshift), for inputs of every shape.
    struct Xorshift(u64);

    impl Xorshift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    #[test]
    fn it_decodes_what_the_crate_encodes() {
        let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
        for len in 0..200 {
            let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            let text = URL_SAFE_NO_PAD.encode(&bytes);
            assert_eq!(decode(&text), Ok(bytes), "{text}");
        }
    }

    #[test]
    fn it_refuses_exactly_what_the_crate_refuses() {
        // Texts near the alphabet: its characters, the standard alphabet's
        // `+` and `/`, padding, a space, a NUL, a non-ASCII byte.
        let near: Vec<char> =
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_+/= \0é"
                .chars()
                .collect();
        let mut rng = Xorshift(0x2545_F491_4F6C_DD1D);
        let mut refused = 0;
        for _ in 0..20_000 {
            let len = (rng.next() % 12) as usize;
            let text: String = (0..len)
                .map(|_| {
                    // Mostly the alphabet, so the trailing-bit rule is reached.
                    let i = rng.next() as usize;
                    if i % 8 == 0 {
                        near[i / 8 % near.len()]
                    } else {
                        near[i / 8 % 64]
                    }
                })
                .collect();
            let ours = decode(&text).ok();
            let crates = URL_SAFE_NO_PAD.decode(&text).ok();
            assert_eq!(ours, crates, "{text:?}");
            refused += usize::from(ours.is_none());
        }
        assert!(refused > 2_000, "the refusals were reached: {refused}");
    }

    #[test]
    fn trailing_bits_padding_and_a_length_of_4n_plus_1_are_refused() {
        assert_eq!(decode("QQ"), Ok(b"A".to_vec()));
        assert_eq!(decode("QR"), Err(NotBase64Url), "low bits set");
        assert_eq!(decode("QUI"), Ok(b"AB".to_vec()));
        assert_eq!(decode("QUJ"), Err(NotBase64Url), "low bits set");
        assert_eq!(decode("QQ=="), Err(NotBase64Url));
        assert_eq!(decode("QUJDR"), Err(NotBase64Url));
        assert_eq!(decode("QUJD+A"), Err(NotBase64Url), "the standard alphabet");
        assert_eq!(decode(""), Ok(vec![]));
    }
}
