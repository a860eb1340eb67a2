// RFC 4180 CSV: quoted fields, doubled quotes, CR LF or LF line ends; and writing it back.

/** Rows of cells, with the 1-based line each row starts on. Empty lines are skipped. */
export function parseCsv(text) {
  const rows = [];
  let row = [], cell = "", quoted = false, line = 1, rowLine = 1, i = 0;
  if (text.charCodeAt(0) === 0xfeff) i = 1; // a byte order mark from a spreadsheet
  const endRow = () => {
    row.push(cell);
    if (row.length > 1 || row[0] !== "") rows.push({ line: rowLine, cells: row });
    row = []; cell = ""; rowLine = line;
  };
  for (; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; }
      else if (c === '"') quoted = false;
      else { if (c === "\n") line++; cell += c; }
    } else if (c === '"' && cell === "") quoted = true;
    else if (c === ",") { row.push(cell); cell = ""; }
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      line++;
      endRow();
    } else cell += c;
  }
  if (quoted) throw new Error(`A quoted field opened on line ${rowLine} is never closed.`);
  if (cell !== "" || row.length) endRow();
  return rows;
}

/** One CSV line, quoting what needs it. */
export function csvLine(cells) {
  return cells.map((c) => (/[",\r\n]/.test(c) ? `"${c.replaceAll('"', '""')}"` : c)).join(",") + "\r\n";
}
