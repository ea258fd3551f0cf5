//! Issue 12: the layout rules that keep the library usable without the command
//! line. clap and anyhow appear only in the binary's files (`main.rs`, `cli.rs`,
//! `commands/`), and no two source files import each other, directly or through
//! others (`commands/transports.rs` and `commands/verbs.rs` once did).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// `src/a/b.rs` and `src/a/b/mod.rs` are module `a::b`; `lib.rs`/`main.rs` the root.
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into()).collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

fn is_binary(file: &Path) -> bool {
    let rel = file.strip_prefix(src()).unwrap();
    rel == Path::new("main.rs") || rel == Path::new("cli.rs") || rel.starts_with("commands")
}

/// The file's text without comments and without its `#[cfg(test)] mod tests`.
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap();
    text.lines()
        .map(|l| l.split("//").next().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn clap_and_anyhow_only_in_the_binary() {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !is_binary(f))
        .filter(|f| {
            // Code only: a doc comment may say why a file does without clap.
            let text = code(f);
            text.contains("clap") || text.contains("anyhow")
        })
        .map(|f| f.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "{offenders:?}");
}

/// Every path `crate::a::b`, `super::a` (and `{x, y::z}` groups after them) a file
/// names, resolved to the file of the longest module prefix that exists.
fn imports(file: &Path, modules: &BTreeMap<Vec<String>, PathBuf>) -> BTreeSet<PathBuf> {
    let code = code(file);
    let me = module_of(file);
    let own_dir = if file.file_name().is_some_and(|n| n == "mod.rs") {
        me.clone()
    } else {
        me[..me.len().saturating_sub(1)].to_vec()
    };
    let mut found = BTreeSet::new();
    let bytes = code.as_bytes();
    let word = |i: usize| i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    let mut resolve = |path: Vec<String>| {
        for n in (0..=path.len()).rev() {
            if let Some(f) = modules.get(&path[..n]) {
                if f != file {
                    found.insert(f.clone());
                }
                return;
            }
        }
    };
    for (start, base) in [("crate::", Vec::new()), ("super::", own_dir.clone())] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let i = from + at;
            from = i + start.len();
            if word(i) {
                continue;
            }
            let mut path = base.clone();
            let rest = &code[from..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let mut segments: Vec<&str> =
                rest[..end].split("::").filter(|s| !s.is_empty()).collect();
            while segments.first() == Some(&"super") {
                segments.remove(0);
                path.pop();
            }
            path.extend(segments.iter().map(|s| s.to_string()));
            if rest[end..].starts_with('{') {
                let group = &rest[end + 1..rest[end..].find('}').map_or(end + 1, |g| end + g)];
                for item in group.split(',') {
                    let mut p = path.clone();
                    p.extend(
                        item.trim()
                            .split("::")
                            .filter(|s| !s.is_empty() && *s != "self" && *s != "*")
                            .map(String::from),
                    );
                    resolve(p);
                }
            } else {
                resolve(path);
            }
        }
    }
    found
}

fn cycle(graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    fn visit(
        node: &PathBuf,
        graph: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        state: &mut BTreeMap<PathBuf, u8>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        state.insert(node.clone(), 1);
        stack.push(node.clone());
        for next in &graph[node] {
            match state.get(next).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|n| n == next).unwrap();
                    return Some(stack[at..].to_vec());
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(node.clone(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn no_import_circle_between_files() {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    for binary in [false, true] {
        let these: Vec<&PathBuf> = files.iter().filter(|f| is_binary(f) == binary).collect();
        let modules: BTreeMap<Vec<String>, PathBuf> =
            these.iter().map(|f| (module_of(f), (*f).clone())).collect();
        let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = these
            .iter()
            .map(|f| ((*f).clone(), imports(f, &modules)))
            .collect();
        assert!(
            graph.values().map(BTreeSet::len).sum::<usize>() > 10,
            "the scan found the imports"
        );
        if let Some(c) = cycle(&graph) {
            panic!("import circle: {c:#?}");
        }
    }
}

/// The scan sees a circle when there is one.
#[test]
fn a_circle_is_found() {
    let a = PathBuf::from("a.rs");
    let b = PathBuf::from("b.rs");
    let graph = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b.clone(), BTreeSet::from([a.clone()])),
    ]);
    assert_eq!(cycle(&graph).map(|c| c.len()), Some(2));
    let line = BTreeMap::from([
        (a.clone(), BTreeSet::from([b.clone()])),
        (b, BTreeSet::new()),
    ]);
    assert_eq!(cycle(&line), None);
}
