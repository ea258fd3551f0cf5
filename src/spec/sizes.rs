//! [`SizeList`]: message sizes in a spec, written as a size spec string (`"1-64K"`,
//! `"1K-8K:1K"`, `"1,8,4K"`; see [`crate::sizes`]) or as a list of numbers.

use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Message sizes in bytes, ascending and distinct. Serialized as a list of numbers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(transparent)]
pub struct SizeList(pub Vec<u64>);

impl std::str::FromStr for SizeList {
    type Err = crate::sizes::SizeSpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        crate::sizes::parse_sizes(s).map(SizeList)
    }
}

impl<'de> Deserialize<'de> for SizeList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = SizeList;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a size spec such as \"1-64K\" or a list of sizes in bytes")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<SizeList, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<SizeList, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<u64>()? {
                    if v > crate::sizes::MAX_SIZE_BYTES {
                        return Err(de::Error::custom(format!("size {v} is larger than 16G")));
                    }
                    out.push(v);
                }
                // Sorted and distinct, as a spec string gives them.
                out.sort_unstable();
                out.dedup();
                if out.is_empty() {
                    return Err(de::Error::custom("the list of sizes is empty"));
                }
                Ok(SizeList(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_from_a_spec_string_or_a_list() {
        let a: SizeList = serde_json::from_str(r#""1-8""#).unwrap();
        assert_eq!(a.0, [1, 2, 4, 8]);
        let b: SizeList = serde_json::from_str("[4096, 1, 1]").unwrap();
        assert_eq!(b.0, [1, 4096]);
        assert_eq!(serde_json::to_string(&b).unwrap(), "[1,4096]");
        for bad in [r#""3x""#, "[]", "[-1]", "true"] {
            assert!(serde_json::from_str::<SizeList>(bad).is_err(), "{bad}");
        }
    }
}
