"""Plain questions that the query-type tests and the query-types bench's test share."""

# Questions about a passage, written the way SQuAD's and COVID-QA's are, that the shipped model
# alone calls summary requests (tests/test_router_classify.py asserts it): none asks for one.
PLAIN_QUESTIONS = (
    "What are the clinical symptoms of pertussis?",
    "What are stators attached to?",
    "What type of treatment do civil disobedients usually receive?",
    "What is one example of a unique factorization domain?",
    "What did the analysis from the sediment deposits indicate?",
)
