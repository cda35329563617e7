//! A small, defensive Python pickle reader: enough of protocols 0–5 to decode PyTorch checkpoints.
//!
//! It builds a tree of [`PyObj`] values without running any code: globals stay names, `REDUCE`/`BUILD`/`NEWOBJ`
//! stay unevaluated calls that the caller interprets (PyTorch's `_rebuild_tensor_v2`, `OrderedDict`...).
//! Every length is checked against the bytes left, so a truncated or hostile file is an error, never a panic or a
//! huge allocation. candle's own `pickle::Stack` is not used because it overflows on the 10-byte `LONG1` magic
//! number that opens legacy `.pth` files and trusts lengths.

use std::collections::HashMap;

/// A decoded pickle value.
#[derive(Debug, Clone, PartialEq)]
pub enum PyObj {
    None,
    Bool(bool),
    Int(i64),
    /// An integer too large for i64: its little-endian two's-complement bytes.
    BigInt(Vec<u8>),
    Float(f64),
    Str(String),
    Bytes(Vec<u8>),
    Tuple(Vec<PyObj>),
    List(Vec<PyObj>),
    /// Key/value pairs in insertion order (Python dicts and `OrderedDict`s).
    Dict(Vec<(PyObj, PyObj)>),
    /// A global name (`GLOBAL` / `STACK_GLOBAL`), e.g. `torch._utils._rebuild_tensor_v2`.
    Global {
        module: String,
        name: String,
    },
    /// `callable(*args)`, not evaluated.
    Reduce {
        callable: Box<PyObj>,
        args: Box<PyObj>,
    },
    /// `obj.__setstate__(state)`, not evaluated.
    Build {
        obj: Box<PyObj>,
        state: Box<PyObj>,
    },
    /// The argument of a `BINPERSID`: what the pickler's `persistent_id` returned.
    PersistentId(Box<PyObj>),
}

impl PyObj {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PyObj::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            PyObj::Int(i) => Some(*i),
            PyObj::Bool(b) => Some(*b as i64),
            _ => None,
        }
    }

    /// The items of a tuple or list.
    pub fn as_seq(&self) -> Option<&[PyObj]> {
        match self {
            PyObj::Tuple(v) | PyObj::List(v) => Some(v),
            _ => None,
        }
    }

    pub fn is_global(&self, module: &str, name: &str) -> bool {
        matches!(self, PyObj::Global { module: m, name: n } if m == module && n == name)
    }
}

/// A pickle decoding error with the byte offset where it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct PickleError {
    pub offset: usize,
    pub message: String,
}

impl std::fmt::Display for PickleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pickle error at byte {}: {}", self.offset, self.message)
    }
}

/// Items on the VM stack: values, or the `MARK` separators.
#[derive(Debug, Clone)]
enum Slot {
    Mark,
    Obj(PyObj),
}

/// Cap on nesting/stack size, so hostile input cannot exhaust memory through the stack alone.
const MAX_STACK: usize = 1 << 20;
/// Cap on the values copied by `DUP` and the memo (`PUT`/`GET`/`MEMOIZE`), in nodes (a string or bytes counts one
/// node per 64 bytes). Python shares such values; this decoder copies them, so a small pickle that duplicates and
/// nests repeatedly would grow exponentially (found by the fuzzer: 1 KB → over 2 GB). Real checkpoints copy
/// small values (storage tuples, globals): thousands of nodes.
const MAX_COPIED: usize = 1 << 22;

impl PyObj {
    /// Nodes in this value (strings and bytes: one per 64 bytes), counting stops past `limit`.
    fn nodes(&self, limit: usize) -> usize {
        let mut n = 0;
        let mut todo = vec![self];
        while let Some(v) = todo.pop() {
            n += 1;
            if n > limit {
                break;
            }
            match v {
                PyObj::Str(s) => n += s.len() / 64,
                PyObj::Bytes(b) | PyObj::BigInt(b) => n += b.len() / 64,
                PyObj::Tuple(items) | PyObj::List(items) => todo.extend(items),
                PyObj::Dict(pairs) => todo.extend(pairs.iter().flat_map(|(k, v)| [k, v])),
                PyObj::Reduce { callable: a, args: b } | PyObj::Build { obj: a, state: b } => todo.extend([&**a, &**b]),
                PyObj::PersistentId(a) => todo.push(a),
                PyObj::None | PyObj::Bool(_) | PyObj::Int(_) | PyObj::Float(_) | PyObj::Global { .. } => {}
            }
        }
        n
    }
}

/// Decode one pickle starting at `*pos` in `data`; on success `*pos` is just past its `STOP` opcode.
pub fn load(data: &[u8], pos: &mut usize) -> Result<PyObj, PickleError> {
    let mut r = Reader { data, pos: *pos };
    let mut stack: Vec<Slot> = Vec::new();
    let mut memo: HashMap<u32, PyObj> = HashMap::new();
    let mut copied = 0usize;
    loop {
        let at = r.pos;
        let op = r.u8()?;
        let err = |m: String| PickleError { offset: at, message: m };
        // Every copy is charged before it is made.
        let mut charge = |v: &PyObj| -> Result<(), PickleError> {
            copied += v.nodes(MAX_COPIED);
            if copied > MAX_COPIED {
                return Err(err(format!(
                    "the pickle copies more than {MAX_COPIED} values through DUP and its memo (a pickle bomb?)"
                )));
            }
            Ok(())
        };
        if stack.len() > MAX_STACK {
            return Err(err("stack too deep".into()));
        }
        match op {
            0x80 => {
                // PROTO
                let v = r.u8()?;
                if v > 5 {
                    return Err(err(format!("unsupported pickle protocol {v}")));
                }
            }
            0x95 => {
                // FRAME: an 8-byte length hint we do not need.
                r.take(8)?;
            }
            b'.' => {
                // STOP
                let top = pop_obj(&mut stack).map_err(err)?;
                *pos = r.pos;
                return Ok(top);
            }
            b'(' => stack.push(Slot::Mark),
            b'}' => stack.push(Slot::Obj(PyObj::Dict(Vec::new()))),
            b']' => stack.push(Slot::Obj(PyObj::List(Vec::new()))),
            b')' => stack.push(Slot::Obj(PyObj::Tuple(Vec::new()))),
            b't' => {
                let items = pop_to_mark(&mut stack).map_err(err)?;
                stack.push(Slot::Obj(PyObj::Tuple(items)));
            }
            b'l' => {
                let items = pop_to_mark(&mut stack).map_err(err)?;
                stack.push(Slot::Obj(PyObj::List(items)));
            }
            b'd' => {
                let items = pop_to_mark(&mut stack).map_err(err)?;
                stack.push(Slot::Obj(PyObj::Dict(pairs(items).map_err(err)?)));
            }
            0x85..=0x87 => {
                // TUPLE1..3
                let n = (op - 0x84) as usize;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(pop_obj(&mut stack).map_err(err)?);
                }
                items.reverse();
                stack.push(Slot::Obj(PyObj::Tuple(items)));
            }
            b'a' => {
                let v = pop_obj(&mut stack).map_err(err)?;
                match top_obj(&mut stack).map_err(err)? {
                    PyObj::List(l) => l.push(v),
                    other => return Err(err(format!("APPEND to a non-list {}", kind(other)))),
                }
            }
            b'e' => {
                let items = pop_to_mark(&mut stack).map_err(err)?;
                match top_obj(&mut stack).map_err(err)? {
                    PyObj::List(l) => l.extend(items),
                    other => return Err(err(format!("APPENDS to a non-list {}", kind(other)))),
                }
            }
            b's' => {
                let v = pop_obj(&mut stack).map_err(err)?;
                let k = pop_obj(&mut stack).map_err(err)?;
                dict_insert(top_obj(&mut stack).map_err(err)?, vec![(k, v)]).map_err(err)?;
            }
            b'u' => {
                let items = pop_to_mark(&mut stack).map_err(err)?;
                let kv = pairs(items).map_err(err)?;
                dict_insert(top_obj(&mut stack).map_err(err)?, kv).map_err(err)?;
            }
            b'J' => {
                let b = r.take(4)?;
                stack.push(Slot::Obj(PyObj::Int(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)));
            }
            b'K' => {
                let v = r.u8()?;
                stack.push(Slot::Obj(PyObj::Int(v as i64)));
            }
            b'M' => {
                let b = r.take(2)?;
                stack.push(Slot::Obj(PyObj::Int(u16::from_le_bytes([b[0], b[1]]) as i64)));
            }
            0x8a | 0x8b => {
                // LONG1 / LONG4: little-endian two's complement of the given length.
                let n = if op == 0x8a { r.u8()? as usize } else { r.u32()? as usize };
                let b = r.take(n)?;
                stack.push(Slot::Obj(long_from_bytes(b)));
            }
            b'G' => {
                let b = r.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                stack.push(Slot::Obj(PyObj::Float(f64::from_be_bytes(a))));
            }
            b'N' => stack.push(Slot::Obj(PyObj::None)),
            0x88 => stack.push(Slot::Obj(PyObj::Bool(true))),
            0x89 => stack.push(Slot::Obj(PyObj::Bool(false))),
            b'X' | 0x8c | 0x8d => {
                // BINUNICODE (u32 len), SHORT_BINUNICODE (u8 len), BINUNICODE8 (u64 len)
                let n = match op {
                    b'X' => r.u32()? as usize,
                    0x8c => r.u8()? as usize,
                    _ => r.u64_len()?,
                };
                let b = r.take(n)?;
                let s = std::str::from_utf8(b).map_err(|_| err("string is not UTF-8".into()))?;
                stack.push(Slot::Obj(PyObj::Str(s.to_string())));
            }
            b'T' | b'U' => {
                // BINSTRING / SHORT_BINSTRING (Python 2 str): kept as text when it is UTF-8.
                let n = if op == b'T' { r.u32()? as usize } else { r.u8()? as usize };
                let b = r.take(n)?;
                let obj = match std::str::from_utf8(b) {
                    Ok(s) => PyObj::Str(s.to_string()),
                    Err(_) => PyObj::Bytes(b.to_vec()),
                };
                stack.push(Slot::Obj(obj));
            }
            b'B' | b'C' | 0x8e => {
                let n = match op {
                    b'B' => r.u32()? as usize,
                    b'C' => r.u8()? as usize,
                    _ => r.u64_len()?,
                };
                let b = r.take(n)?;
                stack.push(Slot::Obj(PyObj::Bytes(b.to_vec())));
            }
            b'c' => {
                let module = r.line()?;
                let name = r.line()?;
                stack.push(Slot::Obj(PyObj::Global { module, name }));
            }
            0x93 => {
                // STACK_GLOBAL
                let name = pop_obj(&mut stack).map_err(err)?;
                let module = pop_obj(&mut stack).map_err(err)?;
                match (module, name) {
                    (PyObj::Str(module), PyObj::Str(name)) => stack.push(Slot::Obj(PyObj::Global { module, name })),
                    _ => return Err(err("STACK_GLOBAL needs two strings".into())),
                }
            }
            b'R' | 0x81 => {
                // REDUCE / NEWOBJ
                let args = pop_obj(&mut stack).map_err(err)?;
                let callable = pop_obj(&mut stack).map_err(err)?;
                stack.push(Slot::Obj(reduce(callable, args)));
            }
            b'b' => {
                let state = pop_obj(&mut stack).map_err(err)?;
                let obj = pop_obj(&mut stack).map_err(err)?;
                let built = match (obj, state) {
                    // An (Ordered)Dict built with extra items: merge them.
                    (PyObj::Dict(mut d), PyObj::Dict(extra)) => {
                        d.extend(extra);
                        PyObj::Dict(d)
                    }
                    (obj, state) => PyObj::Build { obj: Box::new(obj), state: Box::new(state) },
                };
                stack.push(Slot::Obj(built));
            }
            b'Q' => {
                let pid = pop_obj(&mut stack).map_err(err)?;
                stack.push(Slot::Obj(PyObj::PersistentId(Box::new(pid))));
            }
            b'h' | b'j' => {
                let idx = if op == b'h' { r.u8()? as u32 } else { r.u32()? };
                let v = memo.get(&idx).ok_or_else(|| err(format!("memo entry {idx} is missing")))?;
                charge(v)?;
                stack.push(Slot::Obj(v.clone()));
            }
            b'q' | b'r' => {
                let idx = if op == b'q' { r.u8()? as u32 } else { r.u32()? };
                let v = top_obj(&mut stack).map_err(err)?;
                charge(v)?;
                let v = v.clone();
                memo.insert(idx, v);
            }
            0x94 => {
                // MEMOIZE
                let v = top_obj(&mut stack).map_err(err)?;
                charge(v)?;
                let v = v.clone();
                let idx = memo.len() as u32;
                memo.insert(idx, v);
            }
            b'0' => {
                stack.pop().ok_or_else(|| err("POP on an empty stack".into()))?;
            }
            b'1' => {
                pop_to_mark(&mut stack).map_err(err)?;
            }
            b'2' => {
                let v = top_obj(&mut stack).map_err(err)?;
                charge(v)?;
                let v = v.clone();
                stack.push(Slot::Obj(v));
            }
            other => return Err(err(format!("unsupported opcode 0x{other:02x}"))),
        }
    }
}

/// `REDUCE`: `collections.OrderedDict()` becomes an empty dict (its items follow as `SETITEMS`/`BUILD`);
/// everything else stays an unevaluated call.
fn reduce(callable: PyObj, args: PyObj) -> PyObj {
    if callable.is_global("collections", "OrderedDict") && args.as_seq().is_some_and(|a| a.is_empty()) {
        return PyObj::Dict(Vec::new());
    }
    PyObj::Reduce { callable: Box::new(callable), args: Box::new(args) }
}

fn long_from_bytes(b: &[u8]) -> PyObj {
    if b.is_empty() {
        return PyObj::Int(0);
    }
    if b.len() <= 8 {
        let neg = b[b.len() - 1] & 0x80 != 0;
        let mut a = [if neg { 0xff } else { 0 }; 8];
        a[..b.len()].copy_from_slice(b);
        return PyObj::Int(i64::from_le_bytes(a));
    }
    PyObj::BigInt(b.to_vec())
}

fn kind(o: &PyObj) -> &'static str {
    match o {
        PyObj::None => "None",
        PyObj::Bool(_) => "bool",
        PyObj::Int(_) | PyObj::BigInt(_) => "int",
        PyObj::Float(_) => "float",
        PyObj::Str(_) => "str",
        PyObj::Bytes(_) => "bytes",
        PyObj::Tuple(_) => "tuple",
        PyObj::List(_) => "list",
        PyObj::Dict(_) => "dict",
        PyObj::Global { .. } => "global",
        PyObj::Reduce { .. } => "call",
        PyObj::Build { .. } => "object",
        PyObj::PersistentId(_) => "persistent id",
    }
}

fn dict_insert(target: &mut PyObj, kv: Vec<(PyObj, PyObj)>) -> Result<(), String> {
    match target {
        PyObj::Dict(d) => {
            d.extend(kv);
            Ok(())
        }
        other => Err(format!("SETITEM on a non-dict {}", kind(other))),
    }
}

fn pairs(items: Vec<PyObj>) -> Result<Vec<(PyObj, PyObj)>, String> {
    if !items.len().is_multiple_of(2) {
        return Err("odd number of items for a dict".into());
    }
    let mut out = Vec::with_capacity(items.len() / 2);
    let mut it = items.into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k, v));
    }
    Ok(out)
}

fn pop_obj(stack: &mut Vec<Slot>) -> Result<PyObj, String> {
    match stack.pop() {
        Some(Slot::Obj(o)) => Ok(o),
        Some(Slot::Mark) => Err("unexpected MARK on the stack".into()),
        None => Err("stack is empty".into()),
    }
}

fn top_obj(stack: &mut [Slot]) -> Result<&mut PyObj, String> {
    match stack.last_mut() {
        Some(Slot::Obj(o)) => Ok(o),
        Some(Slot::Mark) => Err("unexpected MARK on the stack".into()),
        None => Err("stack is empty".into()),
    }
}

fn pop_to_mark(stack: &mut Vec<Slot>) -> Result<Vec<PyObj>, String> {
    let mark = stack.iter().rposition(|s| matches!(s, Slot::Mark)).ok_or("no MARK on the stack")?;
    let items = stack.split_off(mark + 1);
    stack.pop();
    Ok(items
        .into_iter()
        .map(|s| match s {
            Slot::Obj(o) => o,
            Slot::Mark => unreachable!("split after the last mark"),
        })
        .collect())
}

struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.data.len()).ok_or_else(|| PickleError {
            offset: self.pos,
            message: format!("truncated: needs {n} more bytes, {} left", self.data.len() - self.pos),
        })?;
        let s = &self.data[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, PickleError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64_len(&mut self) -> Result<usize, PickleError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        usize::try_from(u64::from_le_bytes(a))
            .map_err(|_| PickleError { offset: self.pos, message: "length does not fit in memory".into() })
    }

    fn line(&mut self) -> Result<String, PickleError> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| PickleError { offset: self.pos, message: "unterminated GLOBAL name".into() })?;
        let s = String::from_utf8_lossy(&rest[..n]).into_owned();
        self.pos += n + 1;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplication_bombs_are_refused_within_the_copy_budget() {
        // Found by the fuzzer: 1,139 bytes of DUP / TUPLE1 / BUILD / EMPTY_DICT that took over 2 GB when every
        // DUP made a deep copy.
        let path =
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/regressions/pickle/dup-build-tuple-expansion-oom.pt");
        let bytes = std::fs::read(path).unwrap();
        let mut pos = 0;
        let first = load(&bytes, &mut pos).unwrap();
        assert_eq!(first, PyObj::BigInt(vec![0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19]));
        let e = load(&bytes, &mut pos).unwrap_err();
        assert!(e.message.contains("a pickle bomb?"), "{e}");
        // The same written by hand: DUP, TUPLE1, BUILD doubles the value each time (64 times: 2^64 nodes).
        let mut p = vec![0x80, 2, b')'];
        for _ in 0..64 {
            p.extend_from_slice(&[b'2', 0x85, b'b']);
        }
        p.push(b'.');
        let e = load(&p, &mut 0).unwrap_err();
        assert!(e.message.contains("a pickle bomb?"), "{e}");
    }

    #[test]
    fn decodes_protocol2_dict_with_memo_and_long1() {
        // pickle.dumps({'a': (1, 'x'), 'b': [True, None]}, protocol=2) style stream, hand-assembled,
        // followed by a 10-byte LONG1 (the PyTorch magic number).
        let mut p = vec![0x80, 2, b'}', b'q', 0, b'(', 0x8c, 1, b'a', b'K', 1, 0x8c, 1, b'x', 0x86, b'q', 1];
        p.extend_from_slice(&[0x8c, 1, b'b', b']', b'(', 0x88, b'N', b'e', b'u', b'.']);
        let mut pos = 0;
        let v = load(&p, &mut pos).unwrap();
        assert_eq!(pos, p.len());
        assert_eq!(
            v,
            PyObj::Dict(vec![
                (PyObj::Str("a".into()), PyObj::Tuple(vec![PyObj::Int(1), PyObj::Str("x".into())])),
                (PyObj::Str("b".into()), PyObj::List(vec![PyObj::Bool(true), PyObj::None])),
            ])
        );
        let magic = [0x80, 2, 0x8a, 10, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, b'.'];
        let mut pos = 0;
        assert_eq!(
            load(&magic, &mut pos).unwrap(),
            PyObj::BigInt(vec![0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19])
        );
    }

    #[test]
    fn negative_and_small_longs() {
        assert_eq!(long_from_bytes(&[0xff]), PyObj::Int(-1));
        assert_eq!(long_from_bytes(&[0xe9, 0x03]), PyObj::Int(1001));
        assert_eq!(long_from_bytes(&[]), PyObj::Int(0));
    }

    #[test]
    fn malformed_streams_are_errors() {
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![0x80, 2],                      // no STOP
            vec![b'X', 0xff, 0xff, 0xff, 0x7f], // string longer than the data
            vec![b'h', 3, b'.'],                // missing memo entry
            vec![b'a', b'.'],                   // append on empty stack
            vec![0xfe],                         // unknown opcode
            vec![b'(', b'.'],                   // STOP with a mark on top
        ];
        for c in cases {
            let mut pos = 0;
            assert!(load(&c, &mut pos).is_err(), "{c:?} should fail");
        }
    }
}
