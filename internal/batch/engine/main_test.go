package engine_test

import (
	"os"
	"testing"

	"github.com/tidemark/tidemark/internal/pgserver"
)

// server is the package's throwaway PostgreSQL, for SQL tasks on a
// PostgreSQL connection.
var server *pgserver.Server

func TestMain(m *testing.M) { os.Exit(pgserver.RunTests(m, &server)) }
