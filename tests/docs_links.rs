//! Every relative link in `README.md` and `docs/**/*.md` resolves: the target file
//! or directory exists, and a `#fragment` into a Markdown file names one of its
//! headings (GitHub's anchors). External links (`https:`, `mailto:` ...) are not
//! checked. Links are read as CommonMark sees them (pulldown-cmark), so text in
//! code blocks and code spans is not taken for a link.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Files that other branches of this round write; links to them are allowed while
/// they are missing. Once a file exists this test fails until it is removed from
/// the list, so the list cannot outlive its reason.
const PENDING: &[&str] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `README.md` and every `.md` file under `docs/`, sorted.
fn markdown_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read docs/") {
            let path = entry.expect("docs/ entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut files = vec![root().join("README.md")];
    walk(&root().join("docs"), &mut files);
    files.sort();
    files
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_`
/// dropped, spaces turned into `-`; a repeated anchor gets `-1`, `-2`, ...
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The link destinations and the heading anchors of one Markdown text.
fn parse(text: &str) -> (Vec<String>, HashSet<String>) {
    let mut links = Vec::new();
    let mut anchors = HashSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push(dest_url.to_string())
            }
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let mut anchor = base.clone();
                let mut n = 0;
                while !anchors.insert(anchor.clone()) {
                    n += 1;
                    anchor = format!("{base}-{n}");
                }
            }
            _ => {}
        }
    }
    (links, anchors)
}

fn is_external(dest: &str) -> bool {
    dest.split_once(':').is_some_and(|(scheme, _)| {
        !scheme.is_empty() && scheme.chars().all(|c| c.is_ascii_alphabetic())
    })
}

/// Every broken link, as `file: link (why)`.
fn broken_links() -> Vec<String> {
    let root = root();
    let pending: Vec<PathBuf> = PENDING.iter().map(|p| root.join(p)).collect();
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).expect("read markdown");
        let (links, own_anchors) = parse(&text);
        let shown = file
            .strip_prefix(&root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for dest in links {
            if is_external(&dest) {
                continue;
            }
            let (path, fragment) = match dest.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (dest.as_str(), None),
            };
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().expect("a file has a parent").join(path)
            };
            if !target.exists() {
                let waiting = pending.iter().any(|p| same_path(p, &target));
                if !waiting {
                    broken.push(format!("{shown}: {dest} (no such file)"));
                }
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if target.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let anchors = if path.is_empty() {
                own_anchors.clone()
            } else {
                parse(&std::fs::read_to_string(&target).expect("read link target")).1
            };
            if !anchors.contains(fragment) {
                broken.push(format!("{shown}: {dest} (no heading with that anchor)"));
            }
        }
    }
    broken
}

/// `a` and `b` name the same path once `.` and `..` are resolved lexically.
fn same_path(a: &Path, b: &Path) -> bool {
    fn normal(p: &Path) -> PathBuf {
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    }
    normal(a) == normal(b)
}

#[test]
fn every_relative_link_resolves() {
    let broken = broken_links();
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn pending_link_targets_are_still_missing() {
    for p in PENDING {
        assert!(
            !root().join(p).exists(),
            "{p} exists now: remove it from PENDING in tests/docs_links.rs so its links are checked"
        );
    }
}

#[test]
fn the_checker_finds_broken_links_and_anchors() {
    let (links, anchors) = parse(
        "# Use `ngauge loggp` (LogGP)\n## Flags\n## Flags\n[a](x.md#flags-1) \
         ![b](p.svg) `[c](code.md)`\n\n```\n[d](block.md)\n```\n[e](https://example.org)\n",
    );
    assert_eq!(links, ["x.md#flags-1", "p.svg", "https://example.org"]);
    let expected: HashSet<String> = ["use-ngauge-loggp-loggp", "flags", "flags-1"]
        .map(String::from)
        .into();
    assert_eq!(anchors, expected);
    assert!(is_external("https://example.org") && is_external("mailto:a@b"));
    assert!(!is_external("docs/x.md") && !is_external("#flags"));
    assert_eq!(
        slug("mpi (`transports/mpi`, feature `mpi`)"),
        "mpi-transportsmpi-feature-mpi"
    );
}
