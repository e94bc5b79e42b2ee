"""kb-commands: every write is one transaction that changes rows and appends an outbox event."""

from subspace.commands.exclusions import exclude, include
from subspace.commands.files import (
    archive_file,
    delete_file,
    find_stored_file,
    restore_file,
    set_file_enabled,
    upload_file,
)
from subspace.commands.knowledge_bases import create_knowledge_base, find_knowledge_base
from subspace.commands.mail import (
    add_mail,
    archive_mail,
    delete_mail,
    find_mail_id,
    restore_mail,
)
from subspace.commands.nodes import (
    add_node,
    delete_node,
    edit_node,
    indent_node,
    move_node,
    outdent_node,
    set_memory,
    set_props,
)
from subspace.commands.pages import (
    archive_page,
    create_page,
    create_page_from_outline,
    delete_page,
    find_page_by_source,
    rename_page,
    restore_page,
)
from subspace.commands.retry import unit_of_work
from subspace.commands.tags import create_tag, remove_tag, set_tag

__all__ = [
    "add_mail",
    "add_node",
    "archive_file",
    "archive_mail",
    "archive_page",
    "create_knowledge_base",
    "create_page",
    "create_page_from_outline",
    "create_tag",
    "delete_file",
    "delete_mail",
    "delete_node",
    "delete_page",
    "edit_node",
    "exclude",
    "find_knowledge_base",
    "find_mail_id",
    "find_page_by_source",
    "find_stored_file",
    "include",
    "indent_node",
    "move_node",
    "outdent_node",
    "remove_tag",
    "rename_page",
    "restore_file",
    "restore_mail",
    "restore_page",
    "set_file_enabled",
    "set_memory",
    "set_props",
    "set_tag",
    "unit_of_work",
    "upload_file",
]
