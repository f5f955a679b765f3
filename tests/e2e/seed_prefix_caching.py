# The KV cache reuse demo script from ../shared/seeds/000_*.txt (NVIDIA NIM's documentation),
# with its indentation restored. Changed: the URL and the model name come from the environment
# (REPRISE_URL, REPRISE_MODEL), defaulting to the original values. See SEED_ROWS below.
import os
import time
import requests
import json
# Define your model endpoint URL
API_URL = os.environ.get("REPRISE_URL", "http://0.0.0.0:8000") + "/v1/chat/completions"
# Function to send a request to the API and return the response time
def send_request(model, messages, max_tokens=15):
    data = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens,
        "top_p": 1,
        "frequency_penalty": 1.0
    }
    headers = {
        "accept": "application/json",
        "Content-Type": "application/json"
    }
    start_time = time.time()
    response = requests.post(API_URL, headers=headers, data=json.dumps(data))
    end_time = time.time()
    output = response.json()
    print(f"Output: {output['choices'][0]['message']['content']}")
    print(f"Generation time: {end_time - start_time:.4f} seconds")
    return end_time - start_time
# Test function demonstrating caching with a long prompt
def test_prefix_caching():
    model = os.environ.get("REPRISE_MODEL", "your_model_name_here")
    # Long document to simulate complex input
    LONG_PROMPT = """# Table of People\n""" + \
    "| ID | Name | Age | Occupation | Country |\n" + \
    "|-----|---------------|-----|---------------|---------------|\n" + \
    "| 1 | John Doe | 29 | Engineer | USA |\n" + \
    "| 2 | Jane Smith | 34 | Doctor | Canada |\n" * SEED_ROWS # Replicating rows to make the table long
    # First query (no caching)
    messages_1 = [{"role": "user", "content": LONG_PROMPT + "Question: What is the age of John Doe?"}]
    print("\nFirst query (no caching):")
    send_request(model, messages_1)
    # Second query (prefix caching enabled)
    messages_2 = [{"role": "user", "content": LONG_PROMPT + "Question: What is the occupation of Jane Smith?"}]
    print("\nSecond query (with prefix caching):")
    send_request(model, messages_2)
# The original repeats the last row 50 times. The fixture models have a 512-token context, which
# 50 rows (about 1,600 tokens) overflow, so tests pass a smaller count (8 rows: about 410 tokens);
# unset, it is the original 50.
SEED_ROWS = int(os.environ.get("SEED_ROWS", "50"))
if __name__ == "__main__":
    test_prefix_caching()
