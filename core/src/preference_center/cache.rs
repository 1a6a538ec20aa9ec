//! Parsed page templates kept between views: a stored template is parsed at its
//! first view and not again while it is unchanged, so a page view costs its
//! rendering only (the link needs no key and has no limit but the submissions').
//! Bounded by entries and by the bytes of their sources; found by the source itself
//! (its hash, then its text), so an edited template is never answered from an old
//! parse.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use super::liquid::{Template, TemplateError};

/// Most templates kept.
const MAX_ENTRIES: usize = 32;
/// Most bytes of template source kept (parsed, they take a few times more).
const MAX_SOURCE_BYTES: usize = 16 << 20;

struct Entry {
    hash: u64,
    source: Arc<str>,
    template: Arc<Template>,
    /// When it was last used (a counter), to let the least recently used go.
    used: u64,
}

/// The engine's parsed templates.
#[derive(Default)]
pub struct Templates {
    entries: Mutex<(Vec<Entry>, u64)>,
}

impl Templates {
    /// The parsed `source`, from the cache or parsed now (and kept).
    pub fn get(&self, source: &str) -> Result<Arc<Template>, TemplateError> {
        let mut hasher = DefaultHasher::new();
        source.hash(&mut hasher);
        let hash = hasher.finish();
        if let Ok(mut guard) = self.entries.lock() {
            let (entries, clock) = &mut *guard;
            *clock += 1;
            if let Some(e) = entries.iter_mut().find(|e| e.hash == hash && &*e.source == source) {
                e.used = *clock;
                return Ok(e.template.clone());
            }
        }
        // Parsed outside the lock: other pages are served meanwhile.
        let template = Arc::new(Template::parse(source)?);
        if source.len() <= MAX_SOURCE_BYTES {
            if let Ok(mut guard) = self.entries.lock() {
                let (entries, clock) = &mut *guard;
                if !entries.iter().any(|e| e.hash == hash && &*e.source == source) {
                    entries.push(Entry { hash, source: source.into(), template: template.clone(), used: *clock });
                    while entries.len() > MAX_ENTRIES
                        || entries.iter().map(|e| e.source.len()).sum::<usize>() > MAX_SOURCE_BYTES
                    {
                        let oldest = entries.iter().enumerate().min_by_key(|(_, e)| e.used).map(|(i, _)| i);
                        entries.swap_remove(oldest.unwrap_or(0));
                    }
                }
            }
        }
        Ok(template)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|g| g.0.len()).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_template_is_parsed_once_and_an_edited_one_again() {
        let cache = Templates::default();
        let a = cache.get("<p>{{ ${first_name} }}</p>").unwrap();
        let again = cache.get("<p>{{ ${first_name} }}</p>").unwrap();
        assert!(Arc::ptr_eq(&a, &again), "the second view uses the first parse");
        let edited = cache.get("<p>{{ ${last_name} }}</p>").unwrap();
        assert!(!Arc::ptr_eq(&a, &edited));
        assert_eq!(cache.len(), 2);
        assert!(cache.get("{% if %}").is_err(), "a broken template is an error, and not kept");
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn it_keeps_at_most_its_bound_letting_the_least_recently_used_go() {
        let cache = Templates::default();
        let first = cache.get("<p>0</p>").unwrap();
        for i in 1..=MAX_ENTRIES {
            cache.get(&format!("<p>{i}</p>")).unwrap();
            cache.get("<p>0</p>").unwrap(); // kept in use
        }
        assert_eq!(cache.len(), MAX_ENTRIES);
        assert!(Arc::ptr_eq(&first, &cache.get("<p>0</p>").unwrap()), "the one in use stays");
    }
}
