//! Values crossing the case-database layer: one parameter and column type
//! for both backends, so every query is written once.
//!
//! SQLite and PostgreSQL agree on five kinds of value for the case schema:
//! NULL, a 64-bit integer (`INTEGER` / `BIGINT`; flags are 0/1 integers on
//! both), a double (`REAL` / `DOUBLE PRECISION`), text and bytes (`BLOB` /
//! `BYTEA`). [`Value`] is that set; [`Row`] is a result row of them with
//! typed, checked getters.

use super::DbError;

/// One parameter or column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A 64-bit integer (also flags, as 0 or 1).
    Int(i64),
    /// A double.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}

impl From<u64> for Value {
    /// Sizes and offsets: values past `i64::MAX` (which no media reaches)
    /// are stored as `i64::MAX` rather than wrapping negative.
    fn from(v: u64) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<usize> for Value {
    fn from(v: usize) -> Self {
        Value::Int(i64::try_from(v).unwrap_or(i64::MAX))
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(i64::from(v))
    }
}

impl From<f64> for Value {
    /// -0.0 is stored as 0.0, as SQLite stores it, so both engines hold
    /// the same value.
    fn from(v: f64) -> Self {
        Value::Real(v + 0.0)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// A value read back as a Rust type.
pub trait FromValue: Sized {
    /// Convert, or say what the value was instead.
    fn from_value(v: Value) -> Result<Self, String>;
}

fn wrong(expected: &str, v: &Value) -> String {
    let got = match v {
        Value::Null => "NULL",
        Value::Int(_) => "an integer",
        Value::Real(_) => "a real",
        Value::Text(_) => "text",
        Value::Blob(_) => "bytes",
    };
    format!("expected {expected}, found {got}")
}

impl FromValue for i64 {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(i),
            other => Err(wrong("an integer", &other)),
        }
    }
}

impl FromValue for u64 {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => u64::try_from(i).map_err(|_| format!("expected a count, found {i}")),
            other => Err(wrong("an integer", &other)),
        }
    }
}

impl FromValue for bool {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(i != 0),
            other => Err(wrong("a 0/1 flag", &other)),
        }
    }
}

impl FromValue for f64 {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Real(r) => Ok(r),
            // SQLite hands back an integral REAL it stored as an integer.
            Value::Int(i) => Ok(i as f64),
            other => Err(wrong("a real", &other)),
        }
    }
}

impl FromValue for String {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Text(t) => Ok(t),
            other => Err(wrong("text", &other)),
        }
    }
}

impl FromValue for Vec<u8> {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b),
            other => Err(wrong("bytes", &other)),
        }
    }
}

impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            other => T::from_value(other).map(Some),
        }
    }
}

/// One result row.
#[derive(Debug, Clone, Default)]
pub struct Row(pub(crate) Vec<Value>);

impl Row {
    /// Column `i` as `T`; a missing column or a value of another type is a
    /// [`DbError::Column`] naming the column.
    pub fn get<T: FromValue>(&mut self, i: usize) -> Result<T, DbError> {
        let v = self
            .0
            .get_mut(i)
            .map(|v| std::mem::replace(v, Value::Null))
            .ok_or_else(|| DbError::Column {
                column: i,
                reason: "no such column".into(),
            })?;
        T::from_value(v).map_err(|reason| DbError::Column { column: i, reason })
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef};
        Ok(ToSqlOutput::Borrowed(match self {
            Value::Null => ValueRef::Null,
            Value::Int(i) => ValueRef::Integer(*i),
            Value::Real(r) => ValueRef::Real(*r),
            Value::Text(t) => ValueRef::Text(t.as_bytes()),
            Value::Blob(b) => ValueRef::Blob(b),
        }))
    }
}

impl Value {
    /// A SQLite column value.
    pub(crate) fn from_sqlite(v: rusqlite::types::ValueRef<'_>) -> Value {
        use rusqlite::types::ValueRef;
        match v {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Int(i),
            ValueRef::Real(r) => Value::Real(r),
            ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        }
    }
}

// PostgreSQL is strict about parameter types: a parameter the server infers
// as `int4` (a comparison with a literal) must be sent as 4 bytes. A Value
// is converted to whatever type the server asked for, where that is exact.
impl postgres::types::ToSql for Value {
    fn to_sql(
        &self,
        ty: &postgres::types::Type,
        out: &mut bytes::BytesMut,
    ) -> Result<postgres::types::IsNull, Box<dyn std::error::Error + Sync + Send>> {
        use postgres::types::{IsNull, Type};
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(i) => match *ty {
                Type::INT8 => i.to_sql(ty, out),
                Type::INT4 => i32::try_from(*i)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*i)?.to_sql(ty, out),
                Type::BOOL => (*i != 0).to_sql(ty, out),
                Type::FLOAT8 => (*i as f64).to_sql(ty, out),
                _ => i.to_string().to_sql(ty, out),
            },
            Value::Real(r) => match *ty {
                Type::FLOAT4 => (*r as f32).to_sql(ty, out),
                Type::FLOAT8 => r.to_sql(ty, out),
                _ => r.to_string().to_sql(ty, out),
            },
            // PostgreSQL text cannot hold NUL; `files.raw_name` keeps the
            // name's bytes exactly (docs/schema.md).
            Value::Text(t) if t.contains('\0') => t.replace('\0', "\u{fffd}").to_sql(ty, out),
            Value::Text(t) => t.to_sql(ty, out),
            Value::Blob(b) => b.to_sql(ty, out),
        }
    }

    fn accepts(ty: &postgres::types::Type) -> bool {
        use postgres::types::Type;
        matches!(
            *ty,
            Type::INT8
                | Type::INT4
                | Type::INT2
                | Type::BOOL
                | Type::FLOAT8
                | Type::FLOAT4
                | Type::TEXT
                | Type::VARCHAR
                | Type::BPCHAR
                | Type::NAME
                | Type::UNKNOWN
                | Type::BYTEA
        )
    }

    postgres::types::to_sql_checked!();
}

/// A PostgreSQL column, decoded by its type.
pub(crate) fn from_postgres(row: &postgres::Row, i: usize) -> Result<Value, String> {
    use postgres::types::Type;
    let ty = row.columns()[i].type_().clone();
    let err = |e: postgres::Error| format!("column {i} ({ty}): {e}");
    Ok(match ty {
        Type::INT8 => row
            .try_get::<_, Option<i64>>(i)
            .map_err(err)?
            .map_or(Value::Null, Value::Int),
        Type::INT4 => row
            .try_get::<_, Option<i32>>(i)
            .map_err(err)?
            .map_or(Value::Null, |v| Value::Int(v.into())),
        Type::INT2 => row
            .try_get::<_, Option<i16>>(i)
            .map_err(err)?
            .map_or(Value::Null, |v| Value::Int(v.into())),
        Type::BOOL => row
            .try_get::<_, Option<bool>>(i)
            .map_err(err)?
            .map_or(Value::Null, |v| Value::Int(v.into())),
        Type::FLOAT8 => row
            .try_get::<_, Option<f64>>(i)
            .map_err(err)?
            .map_or(Value::Null, Value::Real),
        Type::FLOAT4 => row
            .try_get::<_, Option<f32>>(i)
            .map_err(err)?
            .map_or(Value::Null, |v| Value::Real(v.into())),
        Type::BYTEA => row
            .try_get::<_, Option<Vec<u8>>>(i)
            .map_err(err)?
            .map_or(Value::Null, Value::Blob),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME => row
            .try_get::<_, Option<String>>(i)
            .map_err(err)?
            .map_or(Value::Null, Value::Text),
        other => {
            return Err(format!(
                "column {i} has type {other}, which the case schema does not use (cast it)"
            ));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_convert_and_name_the_column_that_does_not() {
        let mut row = Row(vec![
            Value::Int(7),
            Value::Null,
            Value::Text("x".into()),
            Value::Int(-1),
        ]);
        assert_eq!(row.get::<i64>(0).unwrap(), 7);
        assert_eq!(row.get::<Option<String>>(1).unwrap(), None);
        assert_eq!(row.get::<String>(2).unwrap(), "x");
        let e = row.get::<u64>(3).unwrap_err().to_string();
        assert!(e.contains("column 3"), "{e}");
        assert!(row.get::<i64>(9).is_err());
        assert_eq!(Value::from(u64::MAX), Value::Int(i64::MAX));
        assert_eq!(Value::from(None::<String>), Value::Null);
        assert_eq!(Value::from(true), Value::Int(1));
    }
}
