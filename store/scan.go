package store

import (
	"database/sql"
	"fmt"
)

// rowScanner is a row to scan: *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scanRows calls fn for every row of rows, which a query returned with err,
// and closes rows. Errors, the query's, a row's or the iteration's, are
// prefixed with what ("list admins"). It is the one row loop of the
// package: every list reads its rows through it.
func scanRows(rows *sql.Rows, err error, what string, fn func(rowScanner) error) error {
	if err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	return nil
}

// collect is scanRows for a list whose every row becomes one T.
func collect[T any](rows *sql.Rows, err error, what string, scan func(rowScanner) (T, error)) ([]T, error) {
	var out []T
	err = scanRows(rows, err, what, func(r rowScanner) error {
		v, err := scan(r)
		if err == nil {
			out = append(out, v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deref adapts a scanner of *T to one of T, for lists of values.
func deref[T any](scan func(rowScanner) (*T, error)) func(rowScanner) (T, error) {
	return func(r rowScanner) (T, error) {
		p, err := scan(r)
		if err != nil {
			var zero T
			return zero, err
		}
		return *p, nil
	}
}

// scanString scans a row of one text column.
func scanString(r rowScanner) (string, error) {
	var s string
	err := r.Scan(&s)
	return s, err
}
