package mysqlserver

// TypesTable creates table types with a column of every type the MySQL
// source supports, and TypesRows fills it with values at their edges (row 1
// the maxima, with a 16 MiB LONGBLOB; row 2 the minima and empty values;
// row 3 NULLs), for tests that check each value end to end. Run them with
// SET NAMES utf8mb4 and time_zone '+00:00'.
const TypesTable = "CREATE TABLE types (id int PRIMARY KEY," +
	" ti tinyint, tiu tinyint unsigned, si smallint, siu smallint unsigned," +
	" mi mediumint, miu mediumint unsigned, i int, iu int unsigned, bi bigint, biu bigint unsigned," +
	" d decimal(65,30), f float, db double, b bit(64), b1 bit(1), y year," +
	" dt date, dtm datetime(6), ts timestamp(6) NULL, tm time, tm6 time(6)," +
	" c char(10), vc varchar(20), tx text, l1 varchar(20) CHARACTER SET latin1," +
	" bn binary(4), vb varbinary(10), bl blob, lb longblob," +
	" e enum('a','b''c','é'), s set('x','y','z'), j json, g geometry)"

var TypesRows = []string{
	"INSERT INTO types VALUES (1, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295," +
		" 9223372036854775807, 18446744073709551615, 99999999999999999999999999999999999.999999999999999999999999999999," +
		" 3.40282e38, 1.7976931348623157e308, b'1111111111111111111111111111111111111111111111111111111111111111', b'1', 2155," +
		" '9999-12-31', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07.999999', '838:59:59', '-838:59:58.999999'," +
		" 'ab  ', '😀🎉 x', 'a''b\\\\ \\n', '€ÿé', x'0102', x'00ff', '', REPEAT(x'00ff', 8388608)," +
		" 'b''c', 'z,x', '{\"a\": [1, 2.50, \"é\"]}', ST_GeomFromText('POINT(1 2)'))",
	"INSERT INTO types VALUES (2, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0," +
		" -9223372036854775808, 0, -99999999999999999999999999999999999.999999999999999999999999999999," +
		" -0.1, 2.2250738585072014e-308, b'0', b'0', 1901," +
		" '1000-01-01', '1000-01-01 00:00:00', '1970-01-01 00:00:01', '-838:59:59', '00:00:00.5'," +
		" '', 'Ünïcödé', '', 'a', x'', '', x'00', x''," +
		" 'é', '', '[]', ST_GeomFromText('POINT(0 0)'))",
	"INSERT INTO types (id) VALUES (3)",
}
