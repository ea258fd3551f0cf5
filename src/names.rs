//! Names of the library's choice enums, spelled alike on the command line, in TOML
//! specs and in JSON documents.
//!
//! `named_enum!` defines an enum together with its one spelling per variant: the
//! serde name (so specs and documents use it), `Display` and `FromStr` (so the
//! command line parses it with the library's own parser), `as_str` and `ALL` (so
//! the binary can list the possible values). One list, so the three cannot drift
//! apart.

/// A name that is none of an enum's values.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?} (expected one of: {})", expected.join(", "))]
pub struct UnknownName {
    /// What kind of value was expected (`transport`, `wait mode`, ...).
    pub what: &'static str,
    /// The text given.
    pub given: String,
    /// Every accepted name.
    pub expected: &'static [&'static str],
}

/// Defines a fieldless enum whose variants each have one name:
///
/// ```ignore
/// named_enum! {
///     /// How pairs take turns.
///     pub enum PairsMode("pairs mode") {
///         /// One pair at a time.
///         InTurn = "in-turn",
///         /// All pairs at once.
///         Concurrent = "concurrent",
///     }
/// }
/// ```
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $name:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
            serde::Serialize, serde::Deserialize,
        )]
        #[cfg_attr(test, derive(schemars::JsonSchema))]
        pub enum $ty {
            $( $(#[$vmeta])* #[serde(rename = $name)] $variant, )+
        }

        impl $ty {
            /// Every value, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];
            /// Every name, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The name, as on the command line, in specs and in documents.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl From<$ty> for &'static str {
            fn from(value: $ty) -> Self {
                value.as_str()
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.pad(self.as_str())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::names::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::names::UnknownName {
                        what: $what,
                        given: s.to_string(),
                        expected: Self::NAMES,
                    }),
                }
            }
        }
    };
}

pub(crate) use named_enum;

#[cfg(test)]
mod tests {
    named_enum! {
        /// A test enum.
        pub enum Fruit("fruit") {
            /// An apple.
            Apple = "apple",
            /// Two pears.
            TwoPears = "2pears",
        }
    }

    #[test]
    fn names_round_trip_through_every_spelling() {
        for &f in Fruit::ALL {
            assert_eq!(f.to_string().parse::<Fruit>(), Ok(f));
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{f}\""));
            assert_eq!(serde_json::from_str::<Fruit>(&json).unwrap(), f);
        }
        let e = "pear".parse::<Fruit>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown fruit \"pear\" (expected one of: apple, 2pears)"
        );
    }
}
