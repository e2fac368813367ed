"""The agent: one manifest's servers, tools, prompts and model built into a LangGraph graph, and
its turns.

Modules: ``checks`` (everything ``validate`` checks beyond the schema), ``runtime`` (the running
agent: one fleet, the current generation, apply and reload), ``host`` (what the agent asks of
whoever runs it), ``generation`` (what one version of the manifest builds over the running
servers), ``reconcile`` (the servers brought to a new manifest, the reload's report),
``turn_stream`` (where a tool call's events go during a turn), ``graph`` (the LangGraph graph:
model node, tool node, approvals as interrupts), ``turns`` (one turn as a stream of events), ``sampling`` (a
server's completion request answered by the agent's model), ``call_ledger`` (which tool calls of a
stopped turn had started), ``context`` (what each model request carries of the thread:
``context.max_tokens``, trimming and summaries), ``reload`` (watch, load, reconcile, swap),
``watching`` (the file watcher of watch mode and ``test --watch``).
"""
