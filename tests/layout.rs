//! The layout rules that keep the library usable without the command line and each
//! idea in one home:
//!
//! - clap and anyhow appear only in the binary's files (`main.rs`, `cli.rs`,
//!   `commands/`);
//! - no two source files import each other, directly or through others, in `src/`
//!   and in every crate under `transports/`;
//! - the library's folders stand in one order ([`TIERS`]): a folder imports only
//!   from its own tier or below, and folders of one tier form no circle;
//! - a transport crate depends on no other transport crate, only on the
//!   `ngauge-transport` API.

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
    module_in(file, &src())
}

/// [`module_of`] for a crate whose sources are under `root`.
fn module_in(file: &Path, root: &Path) -> Vec<String> {
    let rel = file.strip_prefix(root).unwrap().with_extension("");
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
    imports_in(file, &src(), modules)
}

/// [`imports`] for a crate whose sources are under `root`.
fn imports_in(
    file: &Path,
    root: &Path,
    modules: &BTreeMap<Vec<String>, PathBuf>,
) -> BTreeSet<PathBuf> {
    let code = code(file);
    let me = module_in(file, root);
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

/// The library's folders (and leaf files) from the top down: a folder may import
/// from its own tier and the tiers below it, never from one above. The binary
/// (`main.rs`, `cli.rs`, `commands/`) stands above them all.
const TIERS: &[&[&str]] = &[
    &["experiment"],
    &["report"],
    &["suite"],
    &["spec"],
    &["patterns", "sync", "coll", "sim"],
    &["job", "launch"],
    &["model", "stats", "clock"],
    &[
        "units",
        "build_facts",
        "time_format",
        "names",
        "sizes",
        "rng",
    ],
    // `ngauge::transport`: the re-export of the ngauge-transport crate.
    &["transport"],
];

/// The tier of a library folder (`src/a/...` or `src/a.rs`): its index in
/// [`TIERS`], 0 the top.
fn tier(folder: &str) -> Option<usize> {
    TIERS.iter().position(|t| t.contains(&folder))
}

/// The folder (first path component under `src/`, without `.rs`) of a library file.
fn folder_of(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap();
    let first = rel.iter().next().unwrap().to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every folder-to-folder import of the library (`crate::a` in a file of folder
/// `b`), with one file that makes it.
fn folder_imports() -> BTreeMap<(String, String), PathBuf> {
    let mut files = Vec::new();
    sources(&src(), &mut files);
    let library: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| !is_binary(f))
        .filter(|f| !f.strip_prefix(src()).unwrap().starts_with("bin"))
        // Test modules kept in files of their own (`tests.rs`, `tests_engine.rs`).
        .filter(|f| {
            !f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("tests")
        })
        .collect();
    let modules: BTreeMap<Vec<String>, PathBuf> =
        library.iter().map(|f| (module_of(f), f.clone())).collect();
    let mut out = BTreeMap::new();
    for f in &library {
        let from = folder_of(f);
        for target in imports(f, &modules) {
            let to = folder_of(&target);
            if to != from && to != "lib" {
                out.entry((from.clone(), to)).or_insert_with(|| f.clone());
            }
        }
        // `crate::transport::...` resolves to lib.rs (a re-export): count it.
        if code(f).contains("crate::transport::") {
            out.entry((from.clone(), "transport".into()))
                .or_insert_with(|| f.clone());
        }
    }
    out
}

/// What breaks the folder order in `edges`: an unplaced folder, an import up the
/// tiers, or a circle of folders within a tier.
fn order_violations(edges: &BTreeMap<(String, String), PathBuf>) -> Vec<String> {
    let mut bad = Vec::new();
    let mut graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for ((from, to), file) in edges {
        match (tier(from), tier(to)) {
            (None, _) => bad.push(format!("{from}: a folder with no place in TIERS")),
            (_, None) => bad.push(format!("{to}: a folder with no place in TIERS")),
            (Some(a), Some(b)) if b < a => bad.push(format!(
                "{from} imports {to}, which stands above it ({})",
                file.display()
            )),
            _ => {}
        }
        graph
            .entry(PathBuf::from(from))
            .or_default()
            .insert(PathBuf::from(to));
        graph.entry(PathBuf::from(to)).or_default();
    }
    if let Some(c) = cycle(&graph) {
        bad.push(format!("a circle of folders: {c:?}"));
    }
    bad.sort();
    bad.dedup();
    bad
}

#[test]
fn folders_stand_in_one_order() {
    let edges = folder_imports();
    assert!(
        edges.len() > 20,
        "the scan found the folder imports: {edges:?}"
    );
    let bad = order_violations(&edges);
    assert!(bad.is_empty(), "{bad:#?}");
}

/// The order check sees an import up the tiers, a circle within a tier and an
/// unplaced folder.
#[test]
fn an_import_up_the_order_is_found() {
    let edge = |a: &str, b: &str| ((a.to_string(), b.to_string()), PathBuf::from("f.rs"));
    let up = BTreeMap::from([edge("clock", "report")]);
    assert_eq!(
        order_violations(&up).len(),
        1,
        "{:?}",
        order_violations(&up)
    );
    let down = BTreeMap::from([edge("report", "clock"), edge("patterns", "sync")]);
    assert!(order_violations(&down).is_empty());
    let circle = BTreeMap::from([edge("patterns", "sync"), edge("sync", "patterns")]);
    assert!(order_violations(&circle)[0].contains("circle"));
    let stranger = BTreeMap::from([edge("newfolder", "clock")]);
    assert!(order_violations(&stranger)[0].contains("no place"));
}

fn transports() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("transports")
}

/// Every crate under `transports/`: its directory.
fn transport_crates() -> Vec<PathBuf> {
    let mut crates: Vec<PathBuf> = std::fs::read_dir(transports())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    crates.sort();
    crates
}

#[test]
fn no_import_circle_in_a_transport_crate() {
    let crates = transport_crates();
    assert!(crates.len() >= 5, "{crates:?}");
    for krate in crates {
        let root = krate.join("src");
        let mut files = Vec::new();
        sources(&root, &mut files);
        // Binaries under src/bin/ are crates of their own.
        files.retain(|f| !f.strip_prefix(&root).unwrap().starts_with("bin"));
        let modules: BTreeMap<Vec<String>, PathBuf> = files
            .iter()
            .map(|f| (module_in(f, &root), f.clone()))
            .collect();
        let graph: BTreeMap<PathBuf, BTreeSet<PathBuf>> = files
            .iter()
            .map(|f| (f.clone(), imports_in(f, &root, &modules)))
            .collect();
        if let Some(c) = cycle(&graph) {
            panic!("import circle in {}: {c:#?}", krate.display());
        }
    }
}

/// A transport crate depends on the API crate and on no other transport: the
/// transports are peers under one trait.
#[test]
fn transport_crates_depend_only_on_the_api() {
    let names: Vec<String> = transport_crates()
        .iter()
        .map(|k| {
            let manifest: toml::Table =
                toml::from_str(&std::fs::read_to_string(k.join("Cargo.toml")).unwrap()).unwrap();
            manifest["package"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert!(names.contains(&"ngauge-transport".to_string()), "{names:?}");
    for krate in transport_crates() {
        let manifest: toml::Table =
            toml::from_str(&std::fs::read_to_string(krate.join("Cargo.toml")).unwrap()).unwrap();
        let me = manifest["package"]["name"].as_str().unwrap();
        for section in ["dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys() {
                let transport = names.contains(dep);
                assert!(
                    !transport || (dep == "ngauge-transport" && me != "ngauge-transport"),
                    "{me} depends on {dep}: a transport crate may depend only on ngauge-transport"
                );
            }
        }
    }
}
