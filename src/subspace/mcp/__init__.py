"""The MCP server: the agent tools over stdio (`subspace mcp`) and streamable HTTP (`/mcp`)."""
