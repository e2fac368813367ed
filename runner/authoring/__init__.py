"""Help for writing a manifest: starter folders (``scaffold``), other tools' MCP configs read
(``formats``, ``jsonc``) and turned into manifests (``importing``), the effective settings
(``effective``), and which values are secrets (``secrets``).
"""
