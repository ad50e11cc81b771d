"""Simulated QQ agents: qubit instruments (:mod:`.qubit`), sequential readouts (:mod:`.readout`), the agent behind the label contract (:mod:`.core`) and the named agent families (:mod:`.agents`)."""
