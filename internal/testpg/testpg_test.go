package testpg

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestServer(t *testing.T) {
	Require(t)
	srv, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the database's own cleanup.
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(srv.Dir); !os.IsNotExist(err) {
			t.Errorf("after Stop, stat %s: %v; want it removed", srv.Dir, err)
		}
	})
	ctx := context.Background()
	u := srv.NewDatabase(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version_num").Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v < "150000" {
		t.Errorf("server_version_num %s; want 15 or newer", v)
	}
	var sync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if sync != "off" {
		t.Errorf("fsync %s; want off without Options.Durable", sync)
	}
}

// TestTemplate: with a Template, every NewDatabase starts as a copy of the
// prepared database, and the copies are independent of each other.
func TestTemplate(t *testing.T) {
	prepared := 0
	sh := &Shared{Template: func(ctx context.Context, u string) error {
		prepared++
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE marks (n int); INSERT INTO marks VALUES (1)")
		return err
	}}
	t.Cleanup(func() {
		if err := sh.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx := context.Background()
	count := func(u string, insert bool) int {
		t.Helper()
		conn, err := pgx.Connect(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if insert {
			if _, err := conn.Exec(ctx, "INSERT INTO marks VALUES (2)"); err != nil {
				t.Fatal(err)
			}
		}
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM marks").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	a, b := sh.NewDatabase(t), sh.NewDatabase(t)
	if got := count(a, true); got != 2 {
		t.Errorf("rows in the first copy after an insert: got %d; want 2", got)
	}
	if got := count(b, false); got != 1 {
		t.Errorf("rows in the second copy: got %d; want the template's 1", got)
	}
	if prepared != 1 {
		t.Errorf("Template ran %d times; want once", prepared)
	}
}
