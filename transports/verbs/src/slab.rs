//! The table of pending requests: a slab of entries reused through a free list,
//! with a generation per entry, so that starting and retiring a request costs no
//! allocation and no hashing once the table has grown to the most requests ever
//! pending at once.
//!
//! A request's id is `generation << 32 | index`. A completion whose work request
//! outlived its request (a flushed completion of a request that failed and was
//! retired) names an older generation and finds nothing, as it found nothing in
//! the map of ever-increasing ids this replaces. Ids fit in the 62 index bits of
//! a `wr_id` ([`crate::layout::wr_id`]): generations wrap at 2^30 uses of one
//! entry. Hand-written rather than the `slab` crate (no generations: a reused
//! key would match a stale completion) or `slotmap` (its keys take all 64 bits).

/// Generations wrap here, so that an id keeps the top two bits of a `wr_id` free.
const GENERATIONS: u32 = 1 << 30;

#[derive(Clone, Debug)]
struct Entry<V> {
    generation: u32,
    value: Option<V>,
}

/// Values under generational ids (see the module docs).
#[derive(Clone, Debug)]
pub struct Slab<V> {
    entries: Vec<Entry<V>>,
    /// Indices of empty entries, the most recently emptied last.
    free: Vec<u32>,
}

impl<V> Default for Slab<V> {
    fn default() -> Self {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
        }
    }
}

fn split(id: u64) -> (usize, u32) {
    (id as u32 as usize, (id >> 32) as u32)
}

impl<V> Slab<V> {
    /// Stores `value`; returns its id.
    pub fn insert(&mut self, value: V) -> u64 {
        let index = match self.free.pop() {
            Some(i) => {
                let e = &mut self.entries[i as usize];
                e.generation = (e.generation + 1) % GENERATIONS;
                e.value = Some(value);
                i
            }
            None => {
                let i = u32::try_from(self.entries.len()).expect("fewer than 2^32 requests");
                self.entries.push(Entry {
                    generation: 0,
                    value: Some(value),
                });
                i
            }
        };
        u64::from(self.entries[index as usize].generation) << 32 | u64::from(index)
    }

    /// The value of `id`, if it is still stored.
    pub fn get(&self, id: &u64) -> Option<&V> {
        let (index, generation) = split(*id);
        let e = self.entries.get(index)?;
        if e.generation == generation {
            e.value.as_ref()
        } else {
            None
        }
    }

    /// As [`Slab::get`], mutable.
    pub fn get_mut(&mut self, id: &u64) -> Option<&mut V> {
        let (index, generation) = split(*id);
        let e = self.entries.get_mut(index)?;
        if e.generation == generation {
            e.value.as_mut()
        } else {
            None
        }
    }

    /// Takes the value of `id` out; its entry will be reused (under a new id).
    pub fn remove(&mut self, id: &u64) -> Option<V> {
        let (index, generation) = split(*id);
        let e = self.entries.get_mut(index)?;
        if e.generation != generation {
            return None;
        }
        let value = e.value.take()?;
        self.free.push(index as u32);
        Some(value)
    }

    /// How many values are stored.
    pub fn len(&self) -> usize {
        self.entries.len() - self.free.len()
    }

    /// Whether no value is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<V> std::ops::Index<&u64> for Slab<V> {
    type Output = V;

    /// The value of `id`; panics if it is not stored (a broken invariant).
    fn index(&self, id: &u64) -> &V {
        self.get(id).expect("a stored request")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_find_their_values_until_removed() {
        let mut s = Slab::default();
        let a = s.insert("a");
        let b = s.insert("b");
        assert_ne!(a, b);
        assert_eq!((s[&a], s[&b], s.len()), ("a", "b", 2));
        *s.get_mut(&b).unwrap() = "B";
        assert_eq!(s.remove(&b), Some("B"));
        assert_eq!(s.get(&b), None);
        assert_eq!(s.remove(&b), None);
        assert_eq!(s.get(&12345), None);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn a_reused_entry_does_not_answer_to_its_old_id() {
        let mut s = Slab::default();
        let old = s.insert(1);
        s.remove(&old);
        let new = s.insert(2);
        // the same entry (no growth), another id: a stale completion finds nothing
        assert_eq!(new as u32, old as u32);
        assert_ne!(new, old);
        assert_eq!(s.get(&old), None);
        assert_eq!(s.get_mut(&old), None);
        assert_eq!(s.remove(&old), None);
        assert_eq!(s[&new], 2);
        assert_eq!(s.entries.len(), 1);
    }

    #[test]
    fn a_window_of_requests_reuses_the_same_entries() {
        let mut s = Slab::default();
        for _round in 0..100 {
            let ids: Vec<u64> = (0..128).map(|i| s.insert(i)).collect();
            for (i, id) in ids.iter().enumerate() {
                assert_eq!(s.remove(id), Some(i));
            }
            assert!(s.is_empty());
        }
        assert_eq!(s.entries.len(), 128);
    }

    #[test]
    fn ids_keep_clear_of_the_wr_id_kind_bits_across_the_generation_wrap() {
        let mut s = Slab::default();
        let id = s.insert(0u8);
        s.remove(&id);
        s.entries[0].generation = GENERATIONS - 2;
        let last = s.insert(1);
        assert_eq!(last >> 32, u64::from(GENERATIONS - 1));
        assert!(last < 1 << 62);
        s.remove(&last);
        let wrapped = s.insert(2);
        assert_eq!(wrapped >> 32, 0);
        assert_eq!(
            crate::layout::split_wr_id(crate::layout::wr_id(crate::layout::WrKind::DataSend, last))
                .1,
            last
        );
    }
}
