//! The headers of passes that verified, remembered by their text. A waiting
//! room signs every pass with the same header (`{"alg", "typ", "kid"}`, the
//! same bytes each time), so from its second pass on a header costs a
//! comparison of its base64url text, not a base64 decode, a JSON parse and a
//! look-up by `kid` (a tenth of what verifying an HS256 pass costs).
//!
//! What is remembered is a pure function of the header's text — which key it
//! names, once its `alg` was found to be that key's — so a remembered header
//! answers exactly as reading it again would. Only a header whose pass's
//! signature then held is remembered: a forger cannot fill the list, and an
//! unknown header is simply read. The list is short (a few keys in rotation,
//! a few signers each); when full, the oldest entry gives way.

use std::sync::RwLock;

/// How many header texts are remembered.
const KNOWN_HEADERS_MAX: usize = 8;

/// Header texts that verified, each with the index of its key in the ring.
#[derive(Default)]
pub(super) struct KnownHeaders {
    seen: RwLock<Seen>,
}

#[derive(Default)]
struct Seen {
    headers: Vec<(Box<str>, usize)>,
    /// Where the next header goes once the list is full (the oldest).
    next: usize,
}

impl KnownHeaders {
    /// The key index of `header` (base64url text), if it was remembered.
    pub(super) fn key_of(&self, header: &str) -> Option<usize> {
        let seen = self.seen.read().unwrap_or_else(|p| p.into_inner());
        seen.headers
            .iter()
            .find(|(text, _)| &**text == header)
            .map(|&(_, key)| key)
    }

    /// Remembers that `header` names the key at `key`.
    pub(super) fn remember(&self, header: &str, key: usize) {
        let mut seen = self.seen.write().unwrap_or_else(|p| p.into_inner());
        if seen.headers.iter().any(|(text, _)| &**text == header) {
            return;
        }
        let entry = (Box::from(header), key);
        if seen.headers.len() < KNOWN_HEADERS_MAX {
            seen.headers.push(entry);
        } else {
            let at = seen.next;
            seen.headers[at] = entry;
            seen.next = (at + 1) % KNOWN_HEADERS_MAX;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_header_names_its_key_and_the_oldest_gives_way() {
        let known = KnownHeaders::default();
        assert_eq!(known.key_of("h0"), None);
        for i in 0..KNOWN_HEADERS_MAX {
            known.remember(&format!("h{i}"), i);
        }
        known.remember("h0", 99); // already there: kept as it was
        assert_eq!(known.key_of("h0"), Some(0));
        known.remember("new", 7);
        assert_eq!(known.key_of("h0"), None, "the oldest gave way");
        assert_eq!(known.key_of("new"), Some(7));
        assert_eq!(known.key_of("h1"), Some(1));
    }
}
