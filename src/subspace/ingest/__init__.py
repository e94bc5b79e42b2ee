"""Getting knowledge in: outlines from Markdown, and (later) text from files and mail."""
