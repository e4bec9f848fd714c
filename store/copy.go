package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// CopyResult says what CopyFromSQLite moved: rows per table, in the order
// they were copied.
type CopyResult struct {
	Tables []TableCount
}

// TableCount is the number of rows of one table.
type TableCount struct {
	Table string
	Rows  int64
}

// Total is the number of rows copied.
func (r CopyResult) Total() int64 {
	var n int64
	for _, t := range r.Tables {
		n += t.Rows
	}
	return n
}

// copyBatch is how many rows one INSERT carries: few enough that the widest
// table (the audit log, 22 columns) stays far below PostgreSQL's 65,535
// parameters, many enough that a long audit log is not a round trip a row.
const copyBatch = 200

// CopyFromSQLite copies every row of src, an SQLite store, into dst, an
// empty PostgreSQL store at the same schema version: the way an
// installation moves from one `postern serve` to several replicas
// (`postern migrate --from-sqlite`). Values are copied as stored — sealed
// keys stay sealed under the same master key, audit rows keep their seq and
// hash, so the chain verifies on dst as it did on src — and the journal of
// interrupted operations comes along, to be recovered by the first replica.
//
// It reads src in one transaction (a consistent snapshot, holding SQLite's
// write lock so that nothing changes it meanwhile) and writes dst in one
// transaction under the write lock: dst ends with all of src or, on any
// error, nothing. It refuses a dst that already holds any row.
func CopyFromSQLite(ctx context.Context, src, dst *Store) (CopyResult, error) {
	var res CopyResult
	if src.dialect != dialectSQLite || dst.dialect != dialectPostgres {
		return res, invalid("copy goes from an SQLite store to a PostgreSQL store")
	}
	sv, err := currentVersion(ctx, src.db)
	if err != nil {
		return res, err
	}
	dv, err := currentVersion(ctx, dst.db)
	if err != nil {
		return res, err
	}
	if sv != dv {
		return res, fmt.Errorf("store: copy: the SQLite database is at schema version %d, the PostgreSQL one at %d", sv, dv)
	}
	stx, err := src.db.BeginTx(ctx, nil)
	if err != nil {
		return res, fmt.Errorf("store: copy: read the SQLite database: %w", err)
	}
	defer stx.Rollback()
	rows, err := stx.QueryContext(ctx, `SELECT name FROM sqlite_schema WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name != 'schema_version' ORDER BY rowid`)
	// Creation order: a table is created after the tables it references.
	tables, err := collect(rows, err, "copy: list tables", scanString)
	if err != nil {
		return res, err
	}
	err = dst.inTx(ctx, func(dtx *sql.Tx) error {
		for _, table := range tables {
			var n int64
			if err := dtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&n); err != nil {
				return fmt.Errorf("store: copy: %s: %w", table, err)
			}
			if n > 0 {
				return invalid("the PostgreSQL database already holds postern data (%d rows in %s); migrate needs an empty one", n, table)
			}
		}
		for _, table := range tables {
			n, err := copyTable(ctx, stx, dtx, table)
			if err != nil {
				return fmt.Errorf("store: copy: %s: %w", table, err)
			}
			var got int64
			if err := dtx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+table).Scan(&got); err != nil {
				return fmt.Errorf("store: copy: %s: %w", table, err)
			}
			if got != n {
				return fmt.Errorf("store: copy: %s: %d rows read, %d in PostgreSQL", table, n, got)
			}
			res.Tables = append(res.Tables, TableCount{Table: table, Rows: n})
		}
		return nil
	})
	if err != nil {
		return CopyResult{}, err
	}
	return res, nil
}

// copyTable copies every row of table from stx to dtx, in rowid order, and
// returns how many it read.
func copyTable(ctx context.Context, stx, dtx *sql.Tx, table string) (int64, error) {
	rows, err := stx.QueryContext(ctx, `SELECT name, type, "notnull" FROM pragma_table_info(?) ORDER BY cid`, table)
	type column struct {
		name, typ string
		notNull   bool
	}
	cols, err := collect(rows, err, "columns", func(r rowScanner) (column, error) {
		var c column
		err := r.Scan(&c.name, &c.typ, &c.notNull)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	list := strings.Join(names, ", ")
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	var n int64
	var batch []any
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		k := len(batch) / len(cols)
		q := `INSERT INTO ` + table + ` (` + list + `) VALUES ` + strings.TrimSuffix(strings.Repeat(one+", ", k), ", ")
		_, err := dtx.ExecContext(ctx, q, batch...)
		batch = batch[:0]
		return err
	}
	rows, err = stx.QueryContext(ctx, `SELECT `+list+` FROM `+table+` ORDER BY rowid`)
	err = scanRows(rows, err, "read", func(r rowScanner) error {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := r.Scan(ptrs...); err != nil {
			return err
		}
		for i, c := range cols {
			if vals[i] == nil && c.notNull && c.typ == "BLOB" {
				vals[i] = []byte{} // an empty BLOB may read back as NULL
			}
		}
		batch = append(batch, vals...)
		n++
		if n%copyBatch == 0 {
			return flush()
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	return n, flush()
}
