// The sidebar's pages as a tree of the folders they were imported from. Pure: no DOM.
//
// A page imported from "notes/plans/q3.md" sits in the folder notes › plans; a page made in
// the app, or imported as a single file, sits at the top level.

const byTitle = new Intl.Collator(undefined, { numeric: true, sensitivity: "base" });

/** Pages in the order asked: "recent" keeps the server's (last changed first), "title" A–Z. */
export function sortPages(pages, order) {
  if (order !== "title") return pages;
  return [...pages].sort((a, b) => byTitle.compare(a.title || "Untitled", b.title || "Untitled"));
}

/** The folders a page was imported from, outermost first; [] for the top level. */
export function folderOf(page) {
  const parts = (page.source_path || "").split("/").filter(Boolean);
  return parts.slice(0, -1);
}

/**
 * The pages as folders: { name, path, folders: [folder…] (by name), pages: [page…] (in the
 * given order), count (pages inside, at any depth) }. The root's path is "".
 */
export function folderTree(pages) {
  const root = { name: "", path: "", folders: new Map(), pages: [], count: 0 };
  for (const page of pages) {
    let folder = root;
    folder.count += 1;
    for (const name of folderOf(page)) {
      if (!folder.folders.has(name)) {
        const path = folder.path ? `${folder.path}/${name}` : name;
        folder.folders.set(name, { name, path, folders: new Map(), pages: [], count: 0 });
      }
      folder = folder.folders.get(name);
      folder.count += 1;
    }
    folder.pages.push(page);
  }
  const settle = (folder) => {
    folder.folders = [...folder.folders.values()].sort((a, b) => byTitle.compare(a.name, b.name));
    folder.folders.forEach(settle);
    return folder;
  };
  return settle(root);
}

/** The pages whose title holds `filter` anywhere, case aside. */
export function matchPages(pages, filter) {
  const wanted = filter.trim().toLocaleLowerCase();
  if (!wanted) return pages;
  return pages.filter((page) => (page.title || "Untitled").toLocaleLowerCase().includes(wanted));
}
