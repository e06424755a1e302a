package doctor

import (
	"fmt"
	"strings"
	"testing"
)

// TestLeastPrivilege: a superuser source user is warned about with the
// grants tidemark needs instead, and those grants, run as printed, make a
// user the doctor passes and does not warn about; a user that is a member
// of a superuser role is warned about too.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	f := setup(t, nil, "")
	owner, role := f.name+"_owner", f.name+"_member"
	f.exec(fmt.Sprintf(`CREATE ROLE %[1]s; CREATE ROLE %[2]s LOGIN REPLICATION;
		CREATE SCHEMA app;
		CREATE TABLE public.orders (id int PRIMARY KEY);
		CREATE TABLE app.lines (id int PRIMARY KEY);
		ALTER TABLE app.lines OWNER TO %[1]s;
		GRANT postgres TO %[2]s`, owner, role))
	t.Cleanup(func() {
		f.exec(fmt.Sprintf(`DROP OWNED BY tidemark, %[1]s, %[2]s; DROP ROLE tidemark, %[1]s, %[2]s`, owner, role))
	})
	stream := `include: ["app.*", "public.*"]`
	c := expect(t, run(t, f.config(f.dsn, stream, "")), ": least privilege", Warn, "postgres is a superuser",
		`CREATE ROLE "tidemark" LOGIN REPLICATION PASSWORD '…';`,
		fmt.Sprintf(`GRANT CREATE ON DATABASE "%s" TO "tidemark";`, f.name),
		`GRANT USAGE ON SCHEMA "app" TO "tidemark";`, `GRANT USAGE ON SCHEMA "public" TO "tidemark";`,
		`GRANT SELECT ON "app"."lines" TO "tidemark";`, `GRANT SELECT ON "public"."orders" TO "tidemark";`,
		`ALTER TABLE "public"."orders" OWNER TO "tidemark";`, fmt.Sprintf(`GRANT "%s" TO "tidemark";`, owner))

	// The fix, as printed, is all the new user needs.
	for _, line := range strings.Split(c.Fix, "\n") {
		sql, _, _ := strings.Cut(line, "--")
		f.exec(strings.ReplaceAll(sql, "…", "pw"))
	}
	checks := run(t, f.config(f.userDSN("tidemark", "pw"), stream, ""))
	noFail(t, checks)
	expect(t, checks, ": least privilege", OK, "tidemark is not a superuser")
	for _, name := range []string{": replication privilege", ": select privilege", ": table keys", ": publication"} {
		expect(t, checks, name, OK)
	}

	// A member of a superuser role can become it.
	expect(t, run(t, f.config(f.userDSN(role, "pw"), stream, "")), ": least privilege", Warn,
		"member of the superuser role postgres", fmt.Sprintf(`REVOKE "postgres" FROM "%s";`, role))
}
