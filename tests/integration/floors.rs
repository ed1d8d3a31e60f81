//! The house's floors: no import circle between the modules of a library
//! crate, so that a reader can take one floor at a time (DEVELOPERS.md).
//! A small import scan, as farm-studio draws it: every `crate::`,
//! `super::` and `self::` path in a module's product code (tests and
//! comments left out; grouped `use` statements expanded) is resolved to
//! the module it names, and the strongly connected components of that
//! graph are the circles. A module naming its own parent (a re-export)
//! does not count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Module = Vec<String>;

/// Every module of the crate under `src`, by path (`channel::kind`), with
/// its product code.
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).unwrap().with_extension("");
                let mut m: Module = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    m.pop();
                }
                let text = std::fs::read_to_string(&p).unwrap();
                let code = match text.find("#[cfg(test)]") {
                    Some(i) => &text[..i],
                    None => &text,
                };
                let code: Vec<&str> = code
                    .lines()
                    .filter(|l| !l.trim_start().starts_with("//"))
                    .collect();
                out.insert(m, code.join("\n"));
            }
        }
    }
    out
}

/// `a::{b, c::{d, e}}` as paths.
fn expand(prefix: &[String], body: &str, out: &mut Vec<Vec<String>>) {
    let mut depth = 0;
    let mut item = String::new();
    let mut items = Vec::new();
    for ch in body.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut item));
        } else {
            item.push(ch);
        }
    }
    items.push(item);
    for item in items {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let Some(open) = item.find("::{")
            && item.ends_with('}')
        {
            let mut p = prefix.to_vec();
            p.extend(item[..open].split("::").map(str::to_string));
            expand(&p, &item[open + 3..item.len() - 1], out);
        } else {
            let name = item.split(" as ").next().unwrap_or(item).trim();
            let mut p = prefix.to_vec();
            p.extend(name.split("::").map(str::to_string));
            out.push(p);
        }
    }
}

/// Every path a module's code names from its own crate.
fn paths(code: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let text = code;
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(start) {
            let at = from + i;
            from = at + start.len();
            // Not the tail of another identifier (`my_crate::`).
            if at > 0
                && text[..at]
                    .chars()
                    .last()
                    .is_some_and(|c| ident(c) && c != ':')
            {
                continue;
            }
            let rest = &text[at..];
            let end = rest.find(|c: char| !ident(c)).unwrap_or(rest.len());
            let head = rest[..end].trim_end_matches(':');
            let segments: Vec<String> = head.split("::").map(str::to_string).collect();
            if rest[end..].starts_with('{') && head.len() + 2 == end {
                // A grouped `use`: up to its matching brace.
                let mut depth = 0;
                let mut close = None;
                for (k, c) in rest[end..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                close = Some(end + k);
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                if let Some(close) = close {
                    expand(&segments, &rest[end + 1..close], &mut out);
                    continue;
                }
            }
            out.push(segments);
        }
    }
    out
}

/// The module `path` names from `module`: its longest prefix that is a
/// module.
fn resolve(modules: &BTreeMap<Module, String>, module: &Module, path: &[String]) -> Option<Module> {
    let (mut base, rest): (Module, &[String]) = match path.first()?.as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.clone(), &path[1..]),
        "super" => {
            let mut b = module.clone();
            b.pop();
            let mut rest = &path[1..];
            while rest.first().is_some_and(|s| s == "super") {
                b.pop();
                rest = &rest[1..];
            }
            (b, rest)
        }
        _ => return None,
    };
    let mut best = modules.contains_key(&base).then(|| base.clone());
    for s in rest {
        base.push(s.clone());
        if modules.contains_key(&base) {
            best = Some(base.clone());
        } else {
            break;
        }
    }
    best
}

/// Which modules each module of the crate under `src` imports (a parent
/// named for a re-export through it left out).
fn imports(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let modules = modules(src);
    let mut out = BTreeMap::new();
    for m in modules.keys() {
        let mut to = BTreeSet::new();
        for p in paths(&modules[m]) {
            let Some(r) = resolve(&modules, m, &p) else {
                continue;
            };
            // Itself, or a parent (a re-export through it).
            if &r == m || m.starts_with(&r) {
                continue;
            }
            to.insert(r);
        }
        out.insert(m.clone(), to);
    }
    out
}

/// The import circles of the crate under `src` (each sorted, as `a::b`).
fn circles(src: &Path) -> Vec<Vec<String>> {
    let graph = imports(src);
    let names: Vec<&Module> = graph.keys().collect();
    let index_of: BTreeMap<&Module, usize> =
        names.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let edges: Vec<BTreeSet<usize>> = names
        .iter()
        .map(|m| graph[*m].iter().map(|r| index_of[r]).collect())
        .collect();
    // Tarjan's strongly connected components.
    struct State {
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on: Vec<bool>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(v: usize, edges: &[BTreeSet<usize>], s: &mut State) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on[v] = true;
        for &w in &edges[v] {
            match s.index[w] {
                None => {
                    visit(w, edges, s);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on[w] = false;
                comp.push(w);
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                s.found.push(comp);
            }
        }
    }
    let n = names.len();
    let mut s = State {
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on: vec![false; n],
        next: 0,
        found: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(v, &edges, &mut s);
        }
    }
    let mut out: Vec<Vec<String>> = s
        .found
        .into_iter()
        .map(|c| {
            let mut c: Vec<String> = c.into_iter().map(|i| names[i].join("::")).collect();
            c.sort();
            c
        })
        .collect();
    out.sort();
    out
}

fn crate_src(dir: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(dir).join("src")
}

#[test]
fn the_scan_finds_a_circle_and_its_absence() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("a")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(
        src.join("a/mod.rs"),
        "mod x;\npub use x::X;\nuse crate::{b::B, c};\n",
    )
    .unwrap();
    std::fs::write(src.join("a/x.rs"), "// use crate::c;\npub struct X;\n").unwrap();
    std::fs::write(src.join("b.rs"), "pub struct B(crate::a::x::X);\n").unwrap();
    std::fs::write(
        src.join("c.rs"),
        "#[cfg(test)]\nmod tests { use crate::a; }\n",
    )
    .unwrap();
    // a -> b -> a::x: no circle (a names its child, b a leaf).
    assert!(circles(src).is_empty(), "{:?}", circles(src));
    std::fs::write(src.join("a/x.rs"), "pub struct X(crate::b::B);\n").unwrap();
    assert_eq!(circles(src), [["a::x", "b"]]);
}

#[test]
fn the_engine_has_no_import_circle() {
    let found = circles(&crate_src("engine"));
    assert!(found.is_empty(), "import circles in engine: {found:?}");
}

#[test]
fn corpus_gen_has_no_import_circle_and_its_file_systems_are_peers() {
    let src = crate_src("corpus-gen");
    let found = circles(&src);
    assert!(found.is_empty(), "import circles in corpus-gen: {found:?}");
    // Each file system's modules (its on-disk structures, its layout
    // planner, its writer) import the shared planner and the neutral
    // vocabulary, never another file system's.
    let file_systems = ["apfs", "exfat", "ext4", "fat", "ntfs"];
    let fs_of = |m: &Module| {
        m.first()
            .filter(|f| file_systems.contains(&f.as_str()))
            .cloned()
    };
    let graph = imports(&src);
    for fs in file_systems {
        assert!(
            graph.keys().any(|m| fs_of(m).as_deref() == Some(fs)),
            "no module {fs} in corpus-gen"
        );
    }
    for (m, to) in &graph {
        let Some(own) = fs_of(m) else { continue };
        for r in to {
            if let Some(other) = fs_of(r) {
                assert_eq!(
                    other,
                    own,
                    "{} imports {}: a file system imports another",
                    m.join("::"),
                    r.join("::")
                );
            }
        }
    }
    for dir in ["filesystems", "lab", "workloads", "ewf-writer"] {
        let found = circles(&crate_src(dir));
        assert!(found.is_empty(), "import circles in {dir}: {found:?}");
    }
}
